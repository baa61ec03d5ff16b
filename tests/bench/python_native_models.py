"""The models of bench_python_native.py (a module of its own: the packager
refuses models defined in __main__).

noop: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1], returns its input.
nested_caller: the same, plus NESTED_S FP64 [1]: calls noop once with
  manypy.infer and returns noop's output and how long that call took,
  measured inside the model (perf_counter around manypy.infer).
plain_caller: as nested_caller without the call (NESTED_S 0): the first of
  the two models a client calls in turn in the baseline.
"""
import time

import manypy
import torch
from torch import nn


class Noop(nn.Module):
    def forward(self, x):
        return x


class NestedCaller(nn.Module):
    def forward(self, x):
        start = time.perf_counter()
        out = manypy.infer("noop", {"INPUT__0": x})["OUTPUT__0"]
        took = time.perf_counter() - start
        return {"OUTPUT__0": out, "NESTED_S": torch.tensor([took], dtype=torch.float64)}


class PlainCaller(nn.Module):
    def forward(self, x):
        return {"OUTPUT__0": x, "NESTED_S": torch.zeros(1, dtype=torch.float64)}
