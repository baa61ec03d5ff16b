"""_byte_tokenizer: char_lm's tokenizer, a module of its own (interned with it).

Token ids are the 95 printable ASCII characters (space to '~') at 0..94;
anything else in a prompt becomes '?'. Decoding is the inverse, one
character per id.
"""

FIRST, LAST = 0x20, 0x7E
VOCAB_SIZE = LAST - FIRST + 1
UNKNOWN = ord("?") - FIRST


def encode(text):
    """Token ids of a prompt (bytes or str)."""
    if isinstance(text, str):
        text = text.encode("utf-8", errors="replace")
    return [b - FIRST if FIRST <= b <= LAST else UNKNOWN for b in bytes(text)]


def decode(ids):
    """The text (bytes) of token ids."""
    return bytes(FIRST + int(i) for i in ids)
