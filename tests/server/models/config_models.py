"""A model whose module-level code looks its own module up by name (issue
28): a dataclass config with `from __future__ import annotations` (what
failed to load as "'NoneType' object has no attribute '__dict__'"), a
NamedTuple resolved with typing.get_type_hints, and a pydantic-style class
resolving its annotations in sys.modules[cls.__module__]."""
from __future__ import annotations

import dataclasses
import sys
import typing

import torch

Offset = float  # a module global an annotation names


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    bias: float = 0.5


class Spec(typing.NamedTuple):
    offset: Offset


SPEC_HINTS = typing.get_type_hints(Spec)


class Settings:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        namespace = vars(sys.modules[cls.__module__])
        cls.fields = {name: eval(annotation, namespace)
                      for name, annotation in cls.__dict__.get("__annotations__", {}).items()}


class ShiftSettings(Settings):
    shift: Offset = 1.0


class ConfiguredAffine(torch.nn.Module):
    """x * 2 + 0.5 + 1.0: each constant from one of the three kinds of class."""

    def __init__(self):
        super().__init__()
        self.config = Config()
        self.spec = Spec(SPEC_HINTS["offset"](ShiftSettings.fields["shift"](ShiftSettings.shift)))

    def forward(self, x):
        return x * self.config.scale + self.config.bias + self.spec.offset
