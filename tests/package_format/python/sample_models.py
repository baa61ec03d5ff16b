"""Small models for the packaging tests. This is a real module (not __main__)
so torch.package can intern it; the tests check its source is in archives."""
import torch
from torch import nn

import sample_helpers


class TinyNet(nn.Module):
    """FP32 [B, 16] -> FP32 [B, 4]; uses a helper from another user module."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 4)
        self.register_buffer("offset", torch.arange(4, dtype=torch.float32))

    def forward(self, x):
        return sample_helpers.squash(self.fc(x)) + self.offset


class MultiOut(nn.Module):
    """(FP32 [B, 3], INT64 [B, 2]) -> tuple(FP32 [B, 3], INT64 [B, 2], BOOL [B])."""

    def forward(self, x, ids):
        return x * 2, ids + 1, x.sum(dim=1) > 0


class DictOut(nn.Module):
    """FP32 [5] -> {"DOUBLE": FP32 [5], "HALF": FP16 [5]} (no batch dimension)."""

    def forward(self, x):
        return {"DOUBLE": x * 2, "HALF": (x / 2).half()}


class Echo(nn.Module):
    """BYTES [1] -> BYTES [1] (upper-cased) and INT32 [1] (lengths)."""

    def forward(self, texts):
        upper = [[t.upper() for t in row] for row in texts]
        lengths = torch.tensor([[len(t) for t in row] for row in texts], dtype=torch.int32)
        return upper, lengths


def build():
    """Zero-argument factory, as export_factory and the CLI expect."""
    torch.manual_seed(3)
    return TinyNet().eval()
