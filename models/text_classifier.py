"""text_classifier: a small transformer text classifier with a plain-Python tokenizer.

The tokenizer lowercases, splits on anything not a-z/0-9 and hashes each word
into a 1000-entry vocabulary with 32-bit FNV-1a (stable across processes,
unlike Python's salted hash()). The model embeds the tokens (+ learned
positions), runs two nn.TransformerEncoderLayer (d_model 64, 4 heads), mean
pools over the real tokens and classifies into 4 classes. Random weights
(torch.manual_seed(7)).

Signature (up to 8 texts per call, dynamic batching on): TEXT BYTES [1]
(each batch item is one UTF-8 text; the call receives a list of B lists of
one bytes object) -> LOGITS FP32 [4].
"""
import re

import torch
from torch import nn

VOCAB_SIZE = 1000
PAD, CLS = 0, 1          # ids 2.. are hashed words
MAX_TOKENS = 64          # CLS + up to 63 words; longer texts are truncated
NUM_CLASSES = 4
D_MODEL = 64

SIGNATURE = {
    "inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1]}],
    "outputs": [{"name": "LOGITS", "datatype": "FP32", "shape": [NUM_CLASSES]}],
    "max_batch_size": 8,
    "batching": {"dynamic": True, "preferred_batch_sizes": [8], "max_queue_delay_microseconds": 1000},
    "description": "2-layer transformer text classifier with a Python tokenizer, random weights",
}

_WORD = re.compile(r"[a-z0-9]+")


def fnv1a_32(data):
    """32-bit FNV-1a of bytes: a stable word hash."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def tokenize(text):
    """Token ids for one text (bytes or str): [CLS, word ids...]."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    words = _WORD.findall(text.lower())[: MAX_TOKENS - 1]
    return [CLS] + [2 + fnv1a_32(w.encode("utf-8")) % (VOCAB_SIZE - 2) for w in words]


def _texts(batch):
    """Flattens the BYTES input ([B][1], or a flat [B], or one text) to B texts."""
    if isinstance(batch, (bytes, bytearray, str)):
        return [batch]
    texts = []
    for item in batch:
        while isinstance(item, (list, tuple)):
            if len(item) != 1:
                raise ValueError(f"TEXT: expected one text per batch item, got {len(item)}")
            item = item[0]
        texts.append(item)
    return texts


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, D_MODEL, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(MAX_TOKENS, D_MODEL) * 0.02)
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=128, dropout=0.0,
                                           batch_first=True)
        # No nested-tensor fast path: a prototype in torch 1.13 that warns per call.
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, NUM_CLASSES)

    def forward(self, text):
        token_lists = [tokenize(t) for t in _texts(text)]
        length = max(len(ids) for ids in token_lists)
        ids = torch.full((len(token_lists), length), PAD, dtype=torch.long)
        for row, tokens in enumerate(token_lists):
            ids[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        padding = ids == PAD
        x = self.embed(ids) + self.pos[:length]
        x = self.encoder(x, src_key_padding_mask=padding)
        keep = (~padding).unsqueeze(-1).to(x.dtype)
        pooled = (x * keep).sum(dim=1) / keep.sum(dim=1)
        return self.head(pooled)


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = TextClassifier()
    return model.eval()


def example_inputs(batch_size=1):
    """Positional inputs for one call: batch_size texts, one per batch item."""
    samples = [b"The quick brown fox jumps over the lazy dog.",
               b"manypy serves PyTorch models as plain Python",
               "Caf\u00e9 au lait, s'il vous pla\u00eet!".encode("utf-8"),
               b"short"]
    return ([[samples[i % len(samples)]] for i in range(batch_size)],)
