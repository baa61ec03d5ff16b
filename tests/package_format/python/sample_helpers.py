"""A second user module, imported by sample_models: it must be interned too."""
import torch


def squash(x):
    return torch.tanh(x) * 3.0
