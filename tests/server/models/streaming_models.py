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


class StepFailed(Exception):
    """An exception that names the states it concerns (continuous batching's
    convention: an attribute `states`)."""

    def __init__(self, message, states):
        super().__init__(message)
        self.states = states


class BatchedCounter(nn.Module):
    """batched_counter: continuous batching (start/step, up to 4 requests a
    step). COUNT, FAIL_AT, STEP_MS (INT64 [1]) -> INDEX INT64 [1] and BATCH
    INT64 [1]: COUNT responses, the i-th with INDEX i and BATCH the number of
    requests its step advanced; each step sleeps STEP_MS (the largest of its
    requests'); the step that would send response FAIL_AT (> 0; the warm-up sends 0) of a request
    raises StepFailed naming that request's state alone. FAIL_AT -2: that
    step raises a plain RuntimeError (no state named)."""

    continuous_batching = 4

    def start(self, count, fail_at, step_ms):
        return {"count": int(count[0]), "fail_at": int(fail_at[0]), "step_ms": int(step_ms[0]),
                "sent": 0}

    def step(self, states):
        time.sleep(max(s["step_ms"] for s in states) / 1000.0)
        if any(s["fail_at"] == -2 and s["sent"] == 1 for s in states):
            raise RuntimeError("this step cannot say whose state broke")
        failing = [s for s in states if s["fail_at"] > 0 and s["sent"] == s["fail_at"]]
        if failing:
            raise StepFailed(f"{len(failing)} state(s) failed at their response "
                             f"{failing[0]['fail_at']}", failing)
        responses, finished = [], []
        for s in states:
            responses.append({"INDEX": torch.tensor([s["sent"]]),
                              "BATCH": torch.tensor([len(states)])})
            s["sent"] += 1
            finished.append(s["sent"] >= s["count"])
        return responses, finished

    def forward(self, count, fail_at, step_ms):
        state = self.start(count, fail_at, step_ms)
        while True:
            responses, finished = self.step([state])
            yield responses[0]
            if finished[0]:
                return
