"""two_io: two inputs, two named outputs returned as a dict; exact arithmetic.

SUM = INPUT_A + INPUT_B and PRODUCT = INPUT_A * INPUT_B, with INPUT_B cast
to float32, so clients and end-to-end tests can check results exactly. No
batch dimension (max_batch_size 0): each call takes exactly one [4] and one
[4]. There are no weights, so the archive holds no tensor storages.

Signature: INPUT_A FP32 [4], INPUT_B INT64 [4] -> SUM FP32 [4],
PRODUCT FP32 [4] (returned as a dict keyed by output name).
"""
import torch
from torch import nn

SIGNATURE = {
    "inputs": [{"name": "INPUT_A", "datatype": "FP32", "shape": [4]},
               {"name": "INPUT_B", "datatype": "INT64", "shape": [4]}],
    "outputs": [{"name": "SUM", "datatype": "FP32", "shape": [4]},
                {"name": "PRODUCT", "datatype": "FP32", "shape": [4]}],
    "max_batch_size": 0,
    "description": "two inputs (FP32, INT64) -> dict of SUM and PRODUCT, no batch dimension",
}


class TwoIO(nn.Module):
    def forward(self, a, b):
        b = b.to(a.dtype)
        return {"SUM": a + b, "PRODUCT": a * b}


def build():
    return TwoIO().eval()


def example_inputs(batch_size=None):
    """Positional inputs for one call (batch_size is ignored: no batch dim)."""
    return (torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([10, 20, 30, 40]))
