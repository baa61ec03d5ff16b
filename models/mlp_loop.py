"""mlp_loop: a Python-overhead-bound model whose cost per call hardly grows
with the batch: 100 layers of (Linear 64x64 + ReLU) applied one by one in a
Python loop. A call does ~200 tiny tensor operations, so the time goes to
the interpreter and the dispatcher, not the arithmetic: dynamic batching
pays that overhead once for up to 16 requests. Random weights
(torch.manual_seed(5)).

Signature (up to 16 rows per call, dynamic batching on): INPUT__0 FP32 [64]
-> OUTPUT__0 FP32 [64].

Also packaged compiled ahead of time (AOTI, make_repository.py: mlp_loop_aoti,
platform torch_aoti, PyTorch >= 2.6): the loop is unrolled by torch.export and
its 200 operations fused into a few compiled kernels, so the per-call
overhead the Python platform pays goes away.
"""
import torch
from torch import nn

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [64]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [64]}],
    "max_batch_size": 16,
    "batching": {"dynamic": True, "preferred_batch_sizes": [16], "max_queue_delay_microseconds": 1000},
    "description": "100 x (Linear 64x64 + ReLU) in a Python loop: overhead-bound",
}

# make_repository.py also writes mlp_loop_aoti.mpk (platform torch_aoti).
AOTI = True

LAYERS = 100


class MlpLoop(nn.Module):
    def __init__(self, layers=LAYERS):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = MlpLoop()
        # Keep activations in range through 100 layers.
        for layer in model.layers:
            nn.init.normal_(layer.weight, std=(2.0 / 64) ** 0.5)
            nn.init.zeros_(layer.bias)
    return model.eval()


def example_inputs(batch_size=1):
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 64, generator=gen),)
