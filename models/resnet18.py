"""resnet18: torchvision's ResNet-18 with random weights (torch.manual_seed(18)).

Image classifier over 1000 classes (signature in _torchvision_classifier.py).
The model's classes live in torchvision, which is extern: the archive's
pickle refers to them, and this module ships in the archive as the record of
how the model was built.
"""
import _torchvision_classifier as _classifier

SIGNATURE = _classifier.signature("resnet18", seed=18)
example_inputs = _classifier.example_inputs


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    return _classifier.build("resnet18", seed=18)
