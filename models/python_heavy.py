"""python_heavy: per-request Python (dicts, lists, loops, branches) around small tensor ops.

For each row of the batch the model builds a dict of features, walks the row
in chunks of 4 and transforms each chunk by a branch on its sum, projects
the result (16 -> 8, tanh), picks one of two heads by a feature, and adds a
bias row chosen by another feature. The tensor math is tiny: the time goes
to the Python interpreter, which is what a pool of interpreters scales.
Random weights (torch.manual_seed(11)).

Signature (up to 8 rows per call, dynamic batching on): INPUT__0 FP32 [16]
-> OUTPUT__0 FP32 [4].
"""
import torch
from torch import nn

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [16]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [4]}],
    "max_batch_size": 8,
    "batching": {"dynamic": True, "max_queue_delay_microseconds": 200},
    "description": "Python-heavy model: per-row dicts, loops and branches, small matmuls",
}


def row_features(values):
    """A dict of plain-Python features of one row (a list of floats)."""
    positives = [v for v in values if v > 0]
    return {
        "mean": sum(values) / len(values),
        "max": max(values),
        "min": min(values),
        "positives": len(positives),
        "energy": sum(v * v for v in values),
    }


class PythonHeavy(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 8)
        self.heads = nn.ModuleDict({"low": nn.Linear(8, 4), "high": nn.Linear(8, 4)})
        self.register_buffer("bias_table", torch.randn(4, 4) * 0.1)

    def forward(self, x):
        outputs = []
        for row in x:
            values = row.tolist()
            feats = row_features(values)
            parts = []
            for start in range(0, len(values), 4):
                chunk = row[start:start + 4]
                total = sum(values[start:start + 4])
                if total > 1.0:
                    parts.append(chunk * 0.5)
                elif total < -1.0:
                    parts.append(chunk.abs())
                else:
                    parts.append(chunk + feats["mean"])
            hidden = torch.tanh(self.proj(torch.cat(parts)))
            head = "high" if feats["positives"] >= len(values) // 2 else "low"
            out = self.heads[head](hidden)
            bucket = min(3, int(feats["energy"] / len(values) * 2))
            out = out + self.bias_table[bucket] * (feats["max"] - feats["min"])
            outputs.append(out)
        return torch.stack(outputs)


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        model = PythonHeavy()
    return model.eval()


def example_inputs(batch_size=1):
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 16, generator=gen),)
