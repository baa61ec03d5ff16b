"""deeplabv3_mobilenet_v3_large: torchvision's DeepLabV3 semantic segmenter
(MobileNetV3-Large backbone, 21 classes), random weights (seed 3), returning
a dict as torchvision's segmentation models do ({"out": logits}).

Images of any size (H and W are -1; dynamic batching joins requests of the
same size). Backbone BatchNorm statistics come from random images
(_random_init.py), so the logits depend on the image.

Signature: INPUT__0 FP32 [3, -1, -1] (a normalized RGB image) -> out FP32
[21, -1, -1] (per-pixel class logits at the input's size), batch dimension
first, up to 4 per call.
"""
import torch
import torchvision

import _random_init

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, -1, -1]}],
    "outputs": [{"name": "out", "datatype": "FP32", "shape": [21, -1, -1]}],
    "max_batch_size": 4,
    "batching": {"dynamic": True, "max_queue_delay_microseconds": 500},
    "description": "torchvision deeplabv3_mobilenet_v3_large, random weights (seed 3); "
                   "images of any size -> {'out': per-pixel logits}",
}


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        model = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None)
        gen = torch.Generator().manual_seed(4)
        _random_init.calibrate_batchnorm(model, torch.randn(2, 3, 128, 128, generator=gen))
    return model.eval()


def example_inputs(batch_size=1):
    """One call's inputs: a batch of random 128x128 images."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 3, 128, 128, generator=gen),)


def more_example_inputs():
    """A further example of another size: H and W vary."""
    gen = torch.Generator().manual_seed(1)
    return [(torch.randn(1, 3, 96, 160, generator=gen),)]
