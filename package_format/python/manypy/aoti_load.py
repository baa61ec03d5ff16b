"""Loading an AOTInductor archive (platform torch_aoti) as the server runs it,
and the load check that compares it with the eager model: for tests, tools
(`manypy-package validate --load`) and manypy.aoti's export. Plain torch: it
imports nothing of manypy.aoti, which builds on it.
"""

import os
import re
import shutil
import tempfile
import zipfile

import torch

from manypy_model_runtime.host import top_folder

from . import load_check
from . import manifest as _manifest
from .reading import read_manifest

# The first PyTorch whose libtorch has the C++ package loader
# (torch/csrc/inductor/aoti_package/model_package_loader.h): Debian 13's 2.6.
MIN_TORCH = (2, 6)

# How far the compiled model's outputs may be from eager PyTorch's (floating
# point only; everything else must be equal). Compiled kernels fuse and
# reorder float arithmetic and oneDNN's prepacked convolutions accumulate in
# another order, so a deep network drifts more than TorchScript's 1e-5
# (load_check.py) allows: measured 2.4e-6 largest difference on resnet18's
# outputs (random weights, batch 1 and 4); 1e-4 leaves room for trained
# weights' larger activations while a wrong kernel still fails.
RTOL, ATOL = 1e-4, 1e-4


def torch_problem(version=None):
    """Why this PyTorch cannot package (or load) an AOTInductor archive, or None."""
    version = version or torch.__version__
    m = re.match(r"^(\d+)\.(\d+)", version)
    if m and (int(m.group(1)), int(m.group(2))) >= MIN_TORCH:
        return None
    return (f"format 'aoti' needs PyTorch {MIN_TORCH[0]}.{MIN_TORCH[1]} or newer "
            f"(torch.export and AOTInductor's .pt2 packages, which the server runs in "
            f"libtorch's AOTInductor runtime); this Python has PyTorch {version}")


def check_torch():
    problem = torch_problem()
    if problem:
        raise ValueError(problem)


def _read_pt2(path, manifest, folder):
    """Extracts the archive's .pt2 into `folder` (the loader reads a file)."""
    ep = manifest["entry_point"]
    package = ep.get("package", _manifest.AOTI_PACKAGE).replace(".", "/")
    rel = f"{package}/{ep.get('resource', _manifest.AOTI_RESOURCE)}"
    with zipfile.ZipFile(path) as zf:
        top = top_folder(zf.namelist(), path)
        target = os.path.join(folder, "model.pt2")
        with zf.open(f"{top}/{rel}") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return target


class Loaded:
    """An archive's compiled model as the server runs it: AOTIModelPackageLoader
    (the same shared object in the same AOTInductor runtime), called with the flat
    list of input tensors in manifest order, answering the flat list of
    outputs in manifest order."""

    def __init__(self, path, manifest=None):
        check_torch()
        self.manifest = manifest or read_manifest(path)
        if self.manifest["platform"] != _manifest.AOTI_PLATFORM:
            raise ValueError(f"{path}: platform {self.manifest['platform']!r} is not "
                             f"{_manifest.AOTI_PLATFORM}")
        folder = tempfile.mkdtemp(prefix="manypy-aoti-load-")
        try:  # the loader extracts the package into a folder of its own
            self.compiled = torch._inductor.aoti_load_package(_read_pt2(path, self.manifest, folder))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def run(self, args):
        with torch.inference_mode():
            return list(self.compiled.loader.run(list(args)))

    def __call__(self, *args):
        return self.run(args)


def load(path):
    """(Loaded, manifest) of a torch_aoti archive, for tests and tools."""
    loaded = Loaded(path)
    return loaded, loaded.manifest


def check_loads(path, manifest, examples, eager, display_path=None):
    """Loads archive `path` as the server does (Loaded), runs `examples` and
    compares with `eager` (the eager model's results, one per example). Raises
    load_check.LoadCheckError naming what differs."""
    display_path = display_path or path
    try:
        loaded = Loaded(path, manifest)
        got = [loaded.run(args) for args in examples]
    except Exception as e:  # the loader's and the compiled code's failures
        raise load_check.LoadCheckError(
            f"load check: {display_path} does not load or run with AOTIModelPackageLoader: "
            f"{type(e).__name__}: {e}") from e
    want = load_check.eager_outputs(manifest, eager)
    problems = load_check.signature_problems(manifest, got)
    names = [o["name"] for o in manifest["outputs"]]
    for i, (w, g) in enumerate(zip(want, got)):
        for n, a, b in zip(names, w, g):
            why = _differs(a, b)
            if why:
                problems.append(f"output '{n}' of example {i}: {why}")
    if problems:
        raise load_check.LoadCheckError(
            f"load check: {display_path} loads, but the compiled model's outputs differ from "
            f"the eager model's: {'; '.join(problems[:4])}")
    return got


def _differs(eager, loaded):
    """None when equal (floating point within RTOL/ATOL), else why not."""
    if eager.dtype != loaded.dtype or eager.shape != loaded.shape:
        return f"eager {eager.dtype} {list(eager.shape)}, compiled {loaded.dtype} {list(loaded.shape)}"
    if torch.equal(eager, loaded):
        return None
    if eager.is_floating_point() and torch.allclose(eager.double(), loaded.double(), rtol=RTOL,
                                                    atol=ATOL, equal_nan=True):
        return None
    diff = (eager.double() - loaded.double()).abs().max().item() if eager.numel() else 0
    return f"values differ (largest difference {diff:g}; allowed rtol {RTOL:g}, atol {ATOL:g})"
