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


class NoneSecond(nn.Module):
    """FP32 [B, 3] -> (FP32 [B, 3], None), as torchaudio's wav2vec2 returns
    (features, lengths) when given no lengths."""

    def forward(self, x):
        return x + 1, None


class NoneInDict(nn.Module):
    """FP32 [4] -> {"Y": FP32 [4], "AUX": None}."""

    def forward(self, x):
        return {"Y": x * 3, "AUX": None}


class ReturnsNone(nn.Module):
    """Returns None: nothing to serve."""

    def forward(self, x):
        return None


class Detections(nn.Module):
    """FP32 [1, 3, H, W] -> [{"boxes": FP32 [N, 4], "scores": FP32 [N]}], one
    dict per image as torchvision's detectors return; N = H * W // 4 varies
    with the image (0 for a 1x1 image)."""

    def forward(self, images):
        out = []
        for image in images:
            n = image.shape[1] * image.shape[2] // 4
            scores = image.flatten()[:n].clone()
            out.append({"boxes": scores.unsqueeze(1).repeat(1, 4), "scores": scores})
        return out


def build():
    """Zero-argument factory, as export_factory and the CLI expect."""
    torch.manual_seed(3)
    return TinyNet().eval()
