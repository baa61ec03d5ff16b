"""Streaming models for test_streaming.py (a module of their own: the
packager refuses models defined in __main__)."""
import torch
from torch import nn


class Pieces(nn.Module):
    """A generator: one response per piece, each piece one row longer."""

    def forward(self, x):
        for n in range(1, int(x.numel()) + 1):
            yield {"PIECE": x[:n] * 2}


class ReturnsIterator(nn.Module):
    """Not a generator function, but returns an iterator of responses."""

    def forward(self, x):
        return iter([x, x + 1])


class YieldsNothing(nn.Module):
    def forward(self, x):
        return iter([])
