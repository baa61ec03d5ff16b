"""compiled_mlp: a Python-overhead-bound model served compiled. 20 layers of
(Linear 64x64 + ReLU) applied one by one in a Python loop (mlp_loop's module),
and build() returns torch.compile(model): Dynamo traces the loop away and
Inductor fuses each bias, ReLU and the next layer's input into C++ kernels,
which the server compiles when it loads the model (its warm-up) and keeps in
Inductor's on-disk cache for its other interpreters and its next start.
Random weights (torch.manual_seed(7)). Needs PyTorch 2.x and, where it is
packaged and served, g++, python3-setuptools and the Python headers:
make_repository.py skips it, saying why, on Debian 12's 1.13. Packaged with
the factory entry point (FACTORY): the server calls build().

Signature (up to 16 rows per call, dynamic batching on): INPUT__0 FP32 [64]
-> OUTPUT__0 FP32 [64].
"""
import torch
from torch import nn

from mlp_loop import MlpLoop

FACTORY = True
SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [64]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [64]}],
    "max_batch_size": 16,
    "batching": {"dynamic": True, "max_queue_delay_microseconds": 1000},
    "description": "20 x (Linear 64x64 + ReLU) in a Python loop, torch.compile'd (Inductor)",
}

LAYERS = 20


def supported():
    """None when this torch can build and compile the model, else why not."""
    if not hasattr(torch, "compile"):
        return f"torch.compile is PyTorch 2.x's; this is {torch.__version__}"
    return None


def build():
    """The compiled model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        model = MlpLoop(LAYERS)
        for layer in model.layers:
            nn.init.normal_(layer.weight, std=(2.0 / 64) ** 0.5)
            nn.init.zeros_(layer.bias)
    return torch.compile(model.eval())


def example_inputs(batch_size=1):
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 64, generator=gen),)


def more_example_inputs():
    return [example_inputs(3)]
