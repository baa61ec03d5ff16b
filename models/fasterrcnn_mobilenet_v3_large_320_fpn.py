"""fasterrcnn_mobilenet_v3_large_320_fpn: torchvision's Faster R-CNN detector
(MobileNetV3-Large FPN backbone, images resized to 320 px), random weights
(seed 320), the number of boxes varying with the image.

Called as torchvision's detectors are: a batch of images in, a list with one
dict per image out ({"boxes", "labels", "scores"}); manypy serves the one
dict of a one-image batch, keyed by output name. No batch dimension
(max_batch_size 0): each call takes one image [1, 3, H, W] of any size.
Backbone BatchNorm statistics come from random images (_random_init.py) and
the classifier's weights are widened (std 0.5), so a random detector finds
a few boxes, a different number per image (up to 100).

Signature: INPUT__0 FP32 [1, 3, -1, -1] (an RGB image in [0, 1]) -> boxes
FP32 [-1, 4] (x1, y1, x2, y2 in input pixels), labels INT64 [-1] (COCO
class ids), scores FP32 [-1].
"""
import torch
import torchvision

import _random_init

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 3, -1, -1]}],
    "outputs": [{"name": "boxes", "datatype": "FP32", "shape": [-1, 4]},
                {"name": "labels", "datatype": "INT64", "shape": [-1]},
                {"name": "scores", "datatype": "FP32", "shape": [-1]}],
    "max_batch_size": 0,
    "description": "torchvision fasterrcnn_mobilenet_v3_large_320_fpn, random weights (seed 320); "
                   "one image [1, 3, H, W] -> a variable number of boxes, labels, scores",
}


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(320)
        model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_320_fpn(
            weights=None, weights_backbone=None, box_score_thresh=0.05)
        gen = torch.Generator().manual_seed(321)
        _random_init.calibrate_batchnorm(model.backbone, torch.rand(4, 3, 320, 320, generator=gen))
        with torch.no_grad():
            model.roi_heads.box_predictor.cls_score.weight.normal_(0.0, 0.5, generator=gen)
    return model.eval()


def example_inputs(batch_size=None):
    """One call's inputs: one random 240x320 image (batch_size is ignored)."""
    gen = torch.Generator().manual_seed(0)
    return (torch.rand(1, 3, 240, 320, generator=gen),)


def more_example_inputs():
    """Further examples, other image sizes: their boxes differ in number."""
    gen = torch.Generator().manual_seed(1)
    return [(torch.rand(1, 3, 320, 240, generator=gen),), (torch.rand(1, 3, 160, 160, generator=gen),)]
