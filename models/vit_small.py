"""vit_small: a small Vision Transformer, torchvision's VisionTransformer class
at ViT-S/16 width (hidden 384, 6 heads, MLP 1536) with 6 of its 12 layers,
random weights (torch.manual_seed(16)): the transformer of the benchmarks,
about as costly per image as resnet18 on a CPU, and all of it matrix
multiplies through the BLAS.

Signature: as the torchvision classifiers (_torchvision_classifier.py).
"""
import torch
import torchvision

import _torchvision_classifier as _classifier

SIGNATURE = _classifier.signature("VisionTransformer (ViT-S/16 width, 6 layers)", seed=16)
example_inputs = _classifier.example_inputs


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(16)
        model = torchvision.models.VisionTransformer(
            image_size=224, patch_size=16, num_layers=6, num_heads=6, hidden_dim=384,
            mlp_dim=1536, num_classes=1000)
    return model.eval()
