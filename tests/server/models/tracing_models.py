"""Models for the tracing end-to-end test (test_tracing.py), packaged by it.

double: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1] per row, x * 2, with
  dynamic batching (the test sends concurrent one-row requests that run as
  one batch).
traced_caller: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1] and TRACE_ID BYTES
  [1]: records its own span ("caller.prepare", with an attribute) and an
  attribute on the request's span through manypy.trace, calls double
  (manypy.infer: a child of its span), and returns double(x) + 1 with
  manypy.request.trace_id.
ticks: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1]: yields x, x + 1, x + 2
  (three streamed responses).
fails: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1]: raises ValueError on a
  negative input (the load check's and the warm-up's zeros pass).
sleeps: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1]: x after sleeping 1.5 s
  (keeps the one interpreter busy while a queued request's client leaves).
"""
import time

import manypy
import torch
from torch import nn


class Double(nn.Module):
    def forward(self, x):
        return x * 2


class TracedCaller(nn.Module):
    def forward(self, x):
        with manypy.trace.span("caller.prepare", rows=int(x.shape[0])):
            y = x.clone()
        manypy.trace.set_attribute("caller.note", "prepared")
        out = manypy.infer("double", {"INPUT__0": y.unsqueeze(0)})["OUTPUT__0"][0] + 1
        return out, [(manypy.request.trace_id or "").encode()]


class Ticks(nn.Module):
    def forward(self, x):
        for k in range(3):
            yield x + k


class Fails(nn.Module):
    def forward(self, x):
        if bool((x < 0).any()):
            raise ValueError("fails always fails")
        return x


class Sleeps(nn.Module):
    def forward(self, x):
        time.sleep(1.5)
        return x
