"""char_lm: a small character-level language model that streams its text.

A GRU (2 layers, hidden 128) over _byte_tokenizer's 95 printable characters,
random weights (torch.manual_seed(11)). `forward` is a generator: it reads
the prompt, then yields one piece of text per generated character (sampled
at temperature 0.8 from a generator seeded by the prompt, so the same prompt
always gives the same text), so `curl -N .../generate_stream` shows the
characters arriving. The manifest says `streaming: true`: the packager sees
the generator.

Signature (Triton's generate names): text_input BYTES [1], max_tokens INT64
[1] (1..512; 0 means 16) -> text_output BYTES [1], one character per response.
"""
import torch
from torch import nn

import _byte_tokenizer as byte_tokenizer

HIDDEN = 128
MAX_TOKENS = 512
DEFAULT_TOKENS = 16  # for max_tokens 0

SIGNATURE = {
    "inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1]},
               {"name": "max_tokens", "datatype": "INT64", "shape": [1]}],
    "outputs": [{"name": "text_output", "datatype": "BYTES", "shape": [1]}],
    "description": "character-level GRU language model that streams its text, random weights",
}


def _prompt(text_input):
    while isinstance(text_input, (list, tuple)):
        if len(text_input) != 1:
            raise ValueError(f"text_input: expected one prompt, got {len(text_input)}")
        text_input = text_input[0]
    return text_input


def _seed(ids):
    """A stable seed from the prompt (Python's hash() is salted per process)."""
    seed = 7
    for i in ids:
        seed = (seed * 131 + i + 1) % (2 ** 31)
    return seed


class CharLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(byte_tokenizer.VOCAB_SIZE, 32)
        self.rnn = nn.GRU(32, HIDDEN, num_layers=2, batch_first=True)
        self.head = nn.Linear(HIDDEN, byte_tokenizer.VOCAB_SIZE)

    def forward(self, text_input, max_tokens):
        ids = byte_tokenizer.encode(_prompt(text_input)) or [0]
        count = int(max_tokens.reshape(-1)[0]) or DEFAULT_TOKENS
        if not 1 <= count <= MAX_TOKENS:
            raise ValueError(f"max_tokens: {count} is not in 1..{MAX_TOKENS} (0: {DEFAULT_TOKENS})")
        sampler = torch.Generator().manual_seed(_seed(ids))
        out, state = self.rnn(self.embed(torch.tensor([ids])))
        logits = self.head(out[:, -1])
        for _ in range(count):
            probs = torch.softmax(logits / 0.8, dim=-1)
            token = int(torch.multinomial(probs, 1, generator=sampler))
            yield {"text_output": [byte_tokenizer.decode([token])]}
            out, state = self.rnn(self.embed(torch.tensor([[token]])), state)
            logits = self.head(out[:, -1])


def build():
    torch.manual_seed(11)
    return CharLM().eval()


def example_inputs():
    return ([b"Once upon a time"], torch.tensor([4]))
