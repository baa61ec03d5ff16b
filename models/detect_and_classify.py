"""detect_and_classify: a pipeline of two models of this folder, composed in
the server: fasterrcnn_mobilenet_v3_large_320_fpn finds boxes in an image,
each box's crop (resized to 224 x 224) goes to mobilenet_v3_small, all crops
in one batched call. Both stay callable alone; this model only calls them
(manypy.infer: in process, through their own queues, tensors not copied).

At most MAX_CROPS boxes (the detector's best), so one classifier call of at
most its max_batch_size (8); an image with no box is classified whole.

Signature: INPUT__0 FP32 [1, 3, -1, -1] (an RGB image in [0, 1]) -> boxes
FP32 [-1, 4] (x1, y1, x2, y2), scores FP32 [-1] (the detector's), classes
INT64 [-1] (the classifier's ImageNet class per crop).
"""
import manypy
import torch
import torch.nn.functional as F
from torch import nn

DETECTOR = "fasterrcnn_mobilenet_v3_large_320_fpn"
CLASSIFIER = "mobilenet_v3_small"
MAX_CROPS = 8
CROP = 224

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 3, -1, -1]}],
    "outputs": [{"name": "boxes", "datatype": "FP32", "shape": [-1, 4]},
                {"name": "scores", "datatype": "FP32", "shape": [-1]},
                {"name": "classes", "datatype": "INT64", "shape": [-1]}],
    "description": f"{DETECTOR} boxes, each crop classified by {CLASSIFIER}: a pipeline of "
                   f"two served models",
}
# The models it calls: packaged without running an example (outside the
# server there is no detector to call), served with them.
CALLS = (DETECTOR, CLASSIFIER)


def crops(image, boxes):
    """[N, 3, CROP, CROP]: each box of `image` [1, 3, H, W], resized (at least
    one pixel wide and high, inside the image)."""
    _, _, height, width = image.shape
    out = []
    for x1, y1, x2, y2 in boxes.tolist():
        x1 = min(max(int(x1), 0), width - 1)
        y1 = min(max(int(y1), 0), height - 1)
        x2 = min(max(int(x2 + 0.999), x1 + 1), width)
        y2 = min(max(int(y2 + 0.999), y1 + 1), height)
        out.append(F.interpolate(image[:, :, y1:y2, x1:x2], size=(CROP, CROP), mode="bilinear",
                                 align_corners=False))
    return torch.cat(out)


class DetectAndClassify(nn.Module):
    def forward(self, image):
        found = manypy.infer(DETECTOR, {"INPUT__0": image})
        boxes, scores = found["boxes"][:MAX_CROPS], found["scores"][:MAX_CROPS]
        if len(boxes) == 0:  # nothing found: the whole image is the one crop
            _, _, height, width = image.shape
            boxes = torch.tensor([[0.0, 0.0, float(width), float(height)]])
            scores = torch.zeros(1)
        logits = manypy.infer(CLASSIFIER, {"INPUT__0": crops(image, boxes)})["OUTPUT__0"]
        return {"boxes": boxes, "scores": scores, "classes": logits.argmax(dim=1)}


def build():
    return DetectAndClassify().eval()


def example_inputs():
    return (torch.rand(1, 3, 160, 200, generator=torch.Generator().manual_seed(5)),)
