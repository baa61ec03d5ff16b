"""What the torchvision image-classifier examples share: one signature, a
seeded build and an example batch. resnet18.py, resnet50.py and
mobilenet_v3_small.py each bind it to one architecture."""
import torch
import torchvision


def signature(arch, seed):
    """Keyword arguments for manypy.package.export (see models/make_repository.py):
    INPUT__0 FP32 [3, 224, 224] (a normalized RGB image) -> OUTPUT__0 FP32
    [1000] (logits), batch dimension first, up to 8 per call, dynamic batching."""
    return {
        "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, 224, 224]}],
        "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [1000]}],
        "max_batch_size": 8,
        "batching": {"dynamic": True, "preferred_batch_sizes": [4, 8],
                     "max_queue_delay_microseconds": 500},
        "description": f"torchvision {arch}, random weights (seed {seed})",
    }


def build(arch, seed):
    """torchvision.models.<arch> with random weights, in eval mode; the global
    RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = getattr(torchvision.models, arch)(weights=None)
    return model.eval()


def example_inputs(batch_size=1):
    """Positional inputs for one call: a random image batch."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 3, 224, 224, generator=gen),)
