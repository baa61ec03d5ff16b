"""Weights for a factory's model: a state dict, a module's, or a
torch.save'd file, checked to hold only tensors and loaded into the model
(strictly, by name) to check that they fit it."""

import os

import torch


def load_weights(weights):
    if isinstance(weights, (str, os.PathLike)):
        weights = torch.load(os.fspath(weights), map_location="cpu")
    if isinstance(weights, torch.nn.Module):
        weights = weights.state_dict()
    if not isinstance(weights, dict):  # OrderedDict included
        raise ValueError(f"weights: expected a state dict (name -> tensor), got {type(weights).__name__}")
    for key, value in weights.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise ValueError(f"weights: entry {key!r} is not a tensor; expected a state dict")
    return weights


def _compiled_original(model):
    """The module a torch.compile'd model (OptimizedModule) wraps, which owns
    the parameters under their own names; else the model."""
    original = getattr(model, "_orig_mod", None)
    return original if isinstance(original, torch.nn.Module) else model


def load_state_dict(model, state_dict):
    if not isinstance(model, torch.nn.Module):
        raise ValueError("weights: the factory must return a torch.nn.Module to take weights")
    try:
        _compiled_original(model).load_state_dict(state_dict, strict=True)
    except RuntimeError as e:
        raise ValueError(f"weights: do not fit the model built by the factory: {e}") from e
