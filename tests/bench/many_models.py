#!/usr/bin/python3
"""Packages N distinct models into DIR for the many-models benchmark and the
on-demand end-to-end test: each a linear layer with weights of its own
(seeded by its index; about MB MiB of FP32), `model_000` ... in the archive
names; every OWN-th one (0, OWN, 2*OWN, ...) has its class in a Python module
of its own (`many_own_NNN`, interned), which also builds a table of Python
objects at import, so its Python side is not only the shared code.

    /usr/bin/python3 tests/bench/many_models.py --out DIR [--count 100] [--mb 8] [--own-every 10] [--prefix model]

Only the first archive runs the packaging tool's load check (a fresh Python
per archive would take minutes for a hundred; the others are the same code
with other weights, and the server loads each of them anyway).
"""
import argparse
import importlib
import os
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python")]

import torch  # noqa: E402
import manypy.package  # noqa: E402

IN_FEATURES = 256

SHARED_SOURCE = '''"""many_shared: the linear model every generated model but the own-module ones uses."""
import torch


class Linear(torch.nn.Module):
    def __init__(self, out_features, in_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(out_features, in_features))

    def forward(self, x):
        # A small answer from all the weights: the output's first 8 features.
        return (x @ self.weight.t())[:, :8]
'''

OWN_SOURCE = '''"""{name}: a model with its own module and a table of Python objects built at import."""
import torch

TABLE = {{i: ("token-%d" % i, float(i)) for i in range({table})}}


class Own(torch.nn.Module):
    def __init__(self, out_features, in_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(out_features, in_features))

    def forward(self, x):
        return (x @ self.weight.t())[:, :8] + float(len(TABLE) % 7)
'''


def out_features_for(mb):
    return max(8, int(mb * (1 << 20) / 4 / IN_FEATURES))


def make_models(out, count, mb, own_every, table=20000, prefix="model"):
    os.makedirs(out, exist_ok=True)
    source_dir = tempfile.mkdtemp(prefix="manypy-many-models-")
    sys.path.insert(0, source_dir)
    with open(os.path.join(source_dir, "many_shared.py"), "w") as f:
        f.write(SHARED_SOURCE)
    shared = importlib.import_module("many_shared")
    rows = out_features_for(mb)
    paths = []
    for i in range(count):
        name = "%s_%03d" % (prefix, i)
        if own_every > 0 and i % own_every == 0:
            module_name = "many_own_%03d" % i
            with open(os.path.join(source_dir, module_name + ".py"), "w") as f:
                f.write(OWN_SOURCE.format(name=module_name, table=table))
            cls = importlib.import_module(module_name).Own
        else:
            cls = shared.Linear
        model = cls(rows, IN_FEATURES)
        generator = torch.Generator().manual_seed(i)
        with torch.no_grad():
            model.weight.copy_(torch.randn(rows, IN_FEATURES, generator=generator))
        path = os.path.join(out, name + ".mpk")
        manypy.package.export(model.eval(), path, name=name,
                              inputs=[("INPUT__0", "FP32", [IN_FEATURES])],
                              outputs=[("OUTPUT__0", "FP32", [8])],
                              example_inputs=(torch.ones(1, IN_FEATURES),),
                              max_batch_size=8, load_check=(i == 0))
        paths.append(path)
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--mb", type=float, default=8)
    parser.add_argument("--own-every", type=int, default=10)
    parser.add_argument("--prefix", default="model", help="model names: PREFIX_000, ...")
    args = parser.parse_args()
    paths = make_models(args.out, args.count, args.mb, args.own_every, prefix=args.prefix)
    total = sum(os.path.getsize(p) for p in paths)
    print("wrote %d models into %s (%.1f MiB)" % (len(paths), args.out, total / (1 << 20)))


if __name__ == "__main__":
    main()
