"""Models that exist to test the server: every datatype, failures, slowness.

Packaged into the test repository by make_server_test_models.py."""
import time

import torch

# Every Open Inference Protocol datatype, with the torch dtype a model sees.
DATATYPES = ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
             "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES"]


class EchoAll(torch.nn.Module):
    """Returns each of its 14 inputs (one per datatype) unchanged."""

    def forward(self, *inputs):
        return tuple(inputs)


class Failing(torch.nn.Module):
    """Raises for negative inputs, so tests see a Python exception travel."""

    def forward(self, x):
        if bool((x < 0).any()):
            raise ValueError("negative input is not allowed")
        return x * 2


class Slow(torch.nn.Module):
    """Sleeps for the given number of milliseconds, then echoes it."""

    def forward(self, milliseconds):
        time.sleep(float(milliseconds.sum()) / 1000.0)
        return milliseconds + 0


class KeepsInput(torch.nn.Module):
    """Keeps each input it is given and returns the one before (zeros the
    first time): a model holding a tensor past its request, as a cache or a
    state would, to test that a shared-memory view it keeps is its own copy."""

    def __init__(self):
        super().__init__()
        self.kept = None

    def forward(self, x):
        before = torch.zeros_like(x) if self.kept is None else self.kept.clone()
        self.kept = x
        return before


class Spin(torch.nn.Module):
    """Loops forever in Python for negative inputs (a model stuck for some
    input); doubles anything else."""

    def forward(self, x):
        if bool((x < 0).any()):
            while True:
                pass
        return x * 2


class BatchedDouble(torch.nn.Module):
    """Doubles its input after 10 ms, whatever the batch: a model whose cost
    per call hardly grows with the batch, so batching shows."""

    def forward(self, x):
        time.sleep(0.01)
        return x * 2


class DoubleAndSum(torch.nn.Module):
    """Two named outputs per row: the row doubled and its sum. Scriptable:
    served as TorchScript (platform torchscript) by the server tests."""

    def forward(self, x):
        return {"DOUBLE": x * 2, "SUM": x.sum(dim=1, keepdim=True)}


class SometimesNone(torch.nn.Module):
    """Returns (x * 2, None), as torchaudio's wav2vec2 returns (features,
    None): exported with the None left out. For negative inputs it returns
    (None, x), so the served output is None: a model error naming it."""

    def forward(self, x):
        if bool((x < 0).any()):
            return None, x
        return x * 2, None


class TaggedDouble(torch.nn.Module):
    """X FP32 [B, 3] -> Y FP32 [B, 3] (doubled) and TAG BYTES [B, 1] (b"row"):
    a signature that fixes every output, so an empty batch is answered
    without calling the model; one that is called anyway raises."""

    def forward(self, x):
        if x.shape[0] == 0:
            raise RuntimeError("tagged_double was called for an empty batch")
        return x * 2, [[b"row"] for _ in range(x.shape[0])]


class EchoRows(torch.nn.Module):
    """X FP32 [B, -1] -> Y FP32 [B, -1] (doubled), T BYTES [B, 1] -> U BYTES
    [B, 1] (upper-cased): a variable output dimension that only the model
    knows, so an empty batch is run like any other."""

    def forward(self, x, texts):
        return x * 2, [[t.upper() for t in row] for row in texts]
