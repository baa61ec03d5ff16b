"""resnet18: torchvision's ResNet-18 with random weights (torch.manual_seed(18)).

Image classifier over 1000 classes. Signature (batch dimension first, up to
8 per call, dynamic batching on): INPUT__0 FP32 [3, 224, 224] (a normalized
RGB image) -> OUTPUT__0 FP32 [1000] (logits). The model's classes live in
torchvision, which is extern: the archive's pickle refers to them, and this
module ships in the archive as the record of how the model was built.
"""
import torch
import torchvision

# Keyword arguments for manypy.package.export (see models/make_repository.py).
SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, 224, 224]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [1000]}],
    "max_batch_size": 8,
    "batching": {"dynamic": True, "preferred_batch_sizes": [4, 8], "max_queue_delay_microseconds": 500},
    "description": "torchvision resnet18, random weights (seed 18)",
}


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(18)
        model = torchvision.models.resnet18(weights=None)
    return model.eval()


def example_inputs(batch_size=1):
    """Positional inputs for one call: a random image batch."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 3, 224, 224, generator=gen),)
