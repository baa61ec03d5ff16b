"""A model whose load looks attributes up by names it makes: what unpickling
and module-level code do all the time (pickle's find_class, getattr with a
built name). CPython's method cache keeps each such name alive, so names
interleaved with the model's own objects would pin their arenas after the
model is gone (PythonModelTest.UnloadingGivesBackTheArenasOfTheNamesItsLoadLookedUp)."""
import torch


class NamedTable(torch.nn.Module):
    """Builds, as it is unpickled, a table of `rows` entries (about 140 bytes
    each) with a lookup of a fresh attribute name every 50th row."""

    def __init__(self, rows=200_000):
        super().__init__()
        self.rows = rows
        self._fill()

    def __setstate__(self, state):
        super().__setstate__(state)
        self._fill()

    def _fill(self):
        self.table = {}
        probe = object()
        for i in range(self.rows):
            self.table[i] = ("row-%d" % i, float(i))
            if i % 50 == 0:
                getattr(probe, "attribute_%d" % i, None)

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("table", None)
        return state

    def forward(self, x):
        return x + len(self.table)
