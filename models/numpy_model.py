"""numpy_model: a forward pass that leaves torch for numpy and comes back.

The input rows go to numpy, are multiplied by a random 8x8 matrix (a torch
buffer viewed as a numpy array), squashed with np.tanh, turned into running
means with np.cumsum, and come back as a float32 tensor. Exercises numpy
(extern, per interpreter) inside a model. Random weights
(torch.manual_seed(5)).

Signature (up to 8 rows per call, no dynamic batching): INPUT__0 FP32 [8]
-> OUTPUT__0 FP32 [8].
"""
import numpy as np
import torch
from torch import nn

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [8]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [8]}],
    "max_batch_size": 8,
    "description": "numpy inside forward: tensor -> numpy (matmul, tanh, cumsum) -> tensor",
}


class NumpyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("weight", torch.randn(8, 8) / 8 ** 0.5)

    def forward(self, x):
        arr = x.detach().cpu().numpy()
        y = np.tanh(arr @ self.weight.numpy())
        y = np.cumsum(y, axis=-1) / np.arange(1, y.shape[-1] + 1, dtype=np.float32)
        return torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32))


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(5)
        model = NumpyModel()
    return model.eval()


def example_inputs(batch_size=1):
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 8, generator=gen),)
