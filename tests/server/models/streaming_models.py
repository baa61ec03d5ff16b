"""Streaming (generator) models for the streaming end-to-end tests
(streaming_e2e_test.cc), packaged into streaming/ by make_server_test_models.py.

ticker: COUNT, DELAY_MS, SIZE (INT64 [1]) and MARKER (BYTES [1], a file path
or empty) -> INDEX INT64 [1] and DATA FP32 [-1]: yields COUNT responses, the
i-th with INDEX i and SIZE zeros in DATA, sleeping DELAY_MS before each
after the first. With a MARKER it appends "yielded <i>" to that file after
each yield returns... before each yield, and "closed <time.time()>" when the
generator is closed early (GeneratorExit at its yield), so a test can see
how many responses the server took from it and when it was closed.

raises_after_three: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1]: yields the
input three times (times 1, 2, 3), then raises ValueError.

wrong_type: INPUT__0 FP32 [-1] -> OUTPUT__0 FP32 [-1]: yields the input,
then a string where a tensor is declared.
"""
import time

import torch
from torch import nn


def _path(marker):
    while isinstance(marker, (list, tuple)):
        marker = marker[0] if marker else b""
    return bytes(marker).decode()


def _note(path, line):
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


class Ticker(nn.Module):
    def forward(self, count, delay_ms, size, marker):
        path = _path(marker)
        n, delay, width = int(count[0]), int(delay_ms[0]) / 1000.0, int(size[0])
        try:
            for i in range(n):
                if i > 0 and delay > 0:
                    time.sleep(delay)
                _note(path, f"yielded {i}")
                yield {"INDEX": torch.tensor([i]), "DATA": torch.zeros(width)}
        except GeneratorExit:
            _note(path, f"closed {time.time()}")
            raise


class RaisesAfterThree(nn.Module):
    def forward(self, x):
        for k in (1.0, 2.0, 3.0):
            yield x * k
        raise ValueError("the fourth response cannot be made")


class WrongType(nn.Module):
    def forward(self, x):
        yield x
        yield "not a tensor"
