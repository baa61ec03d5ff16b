"""Models that misbehave on purpose, for the fault-injection end-to-end tests
(tests/server/fault_e2e_test.cc). Packaged by make_server_test_models.py into
the test repository's faults/ folder (and swap/ for the archive-replacement
tests), away from the models other tests load."""
import os
import sys

import torch

import fault_helpers


class WrongOutput(torch.nn.Module):
    """Declares one FP32 output shaped like its input; the first element
    picks the fault: exactly 1 a string instead of a tensor, 2 an extra
    dimension, 3 INT64 instead of FP32, 4 a dict without the declared output;
    anything else x * 2 (the right answer)."""

    def forward(self, x):
        mode = float(x[0])
        if mode == 1:
            return "not a tensor"
        if mode == 2:
            return torch.stack([x, x])
        if mode == 3:
            return x.to(torch.int64)
        if mode == 4:
            return {"SOMETHING_ELSE": x}
        return x * 2


class Exits(torch.nn.Module):
    """The first element picks how it leaves: exactly 1 sys.exit(3), 2
    sys.exit("bye from the model"), 3 os._exit(7) (the whole process);
    anything else x * 2."""

    def forward(self, x):
        mode = float(x[0])
        if mode == 1:
            sys.exit(3)
        if mode == 2:
            sys.exit("bye from the model")
        if mode == 3:
            os._exit(7)
        return x * 2


class FailsToLoad(torch.nn.Module):
    """Exports and runs anywhere, but raises while being unpickled inside a
    manypy interpreter (where the host's `_manypy` module exists): a model
    whose load fails."""

    def __setstate__(self, state):
        # torch.package lets packaged code import only extern modules, so look, don't import.
        if "_manypy" not in sys.modules:
            return super().__setstate__(state)
        raise RuntimeError("fails_to_load refuses to load: its weights file is gone")

    def forward(self, x):
        return x


class RaisesInHelper(torch.nn.Module):
    """Doubles its input; a negative one makes fault_helpers raise, two calls
    deep: an inference error whose message names that file and line."""

    def forward(self, x):
        return fault_helpers.check_input(x) * 2


class FailsToLoadInHelper(torch.nn.Module):
    """Raises while being unpickled inside a manypy interpreter, two calls
    deep in fault_helpers: a load error whose reason names that file and line."""

    def __setstate__(self, state):
        if "_manypy" not in sys.modules:  # exporting: load normally
            return super().__setstate__(state)
        fault_helpers.check_state(state)

    def forward(self, x):
        return x


class Scaled(torch.nn.Module):
    """Multiplies by `factor`, read from the last element of an 8 MiB stored
    weight (so requests touch the archive's mapped bytes far from its start):
    versions 1 and 2 of `scaled` differ only in the factor."""

    def __init__(self, factor):
        super().__init__()
        self.table = torch.nn.Parameter(torch.full((2 << 20,), float(factor)), requires_grad=False)

    def forward(self, x):
        return x * self.table[-1]


# The descriptors HoldsFiles holds, across calls (module state: one list per
# interpreter).
_held = []


class HoldsFiles(torch.nn.Module):
    """Model code that leaks descriptors: the first element n > 0 opens
    /dev/null until this interpreter holds n (or until the process has none
    left: EMFILE); n == 0 closes them all. Returns how many it holds."""

    def forward(self, x):
        want = int(x[0])
        if want == 0:
            while _held:
                os.close(_held.pop())
        while len(_held) < want:
            try:
                _held.append(os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC))
            except OSError:
                break
        return torch.full_like(x, float(len(_held)))
