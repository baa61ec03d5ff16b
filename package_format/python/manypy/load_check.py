"""The load check: what validates, loads (issue 28).

An archive is loaded in a fresh process the way the server loads it: Debian's
/usr/bin/python3 (the Python the server embeds), isolated as the server's
interpreters are (no PYTHONPATH, no user site-packages, no working folder on
sys.path), the server's own loader (the package manypy_model_runtime: the
same importer, the extern modules imported first, the entry point built over
the archive's storages), then the server's warm-up call, then the example
inputs, whose outputs are compared with the eager model's. Any failure is a
LoadCheckError naming the stage, the exception and the archive's own file
and line (as the server names them).

    check_loads(path, examples=[(x,)], eager=[[y]])  # raises LoadCheckError
"""

import json
import os
import shutil
import subprocess
import tempfile
import warnings

import torch

import manypy_model_runtime
from manypy_model_runtime import host

from . import archive_traceback
from . import serving
from . import value_specs

# The Python the server embeds (DESIGN.md); $MANYPY_SERVER_PYTHON for another.
SERVER_PYTHON = "/usr/bin/python3"
SERVER_PYTHON_ENV = "MANYPY_SERVER_PYTHON"
_CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load_check_child.py")
# Loaded outputs may differ from eager ones by this much (floating point only;
# the tolerance the TorchScript tests allow); everything else must be equal.
RTOL, ATOL = 1e-5, 1e-5
SKIP_HINT = ("--no-load-check (no_load_check=True) skips the check, for archives built on a "
             "machine without the model's runtime")


class LoadCheckError(ValueError):
    """The archive does not load, warm up or reproduce its examples as the server would."""


def server_python():
    return os.environ.get(SERVER_PYTHON_ENV) or SERVER_PYTHON


def eager_outputs(manifest, results):
    """Each example's eager result as the list of outputs the server would
    send (the runtime's rule: dict keys, tuple positions, NAME__<index>)."""
    names = [o["name"] for o in manifest["outputs"]]
    return [manypy_model_runtime._as_output_list(r, names) for r in results]


def _values_differ(eager, loaded):
    """None when equal (floating tensors within RTOL/ATOL), else why not."""
    if isinstance(eager, torch.Tensor) or isinstance(loaded, torch.Tensor):
        if not (isinstance(eager, torch.Tensor) and isinstance(loaded, torch.Tensor)):
            return f"eager gave a {type(eager).__name__}, loaded a {type(loaded).__name__}"
        if eager.dtype != loaded.dtype or eager.shape != loaded.shape:
            return (f"eager {eager.dtype} {list(eager.shape)}, loaded {loaded.dtype} "
                    f"{list(loaded.shape)}")
        if torch.equal(eager, loaded):
            return None
        # In double: allclose has no kernel for every dtype (FP16, BF16) on every torch.
        if eager.is_floating_point() and torch.allclose(eager.double(), loaded.double(),
                                                        rtol=RTOL, atol=ATOL, equal_nan=True):
            return None
        diff = (eager.double() - loaded.double()).abs().max().item() if eager.numel() else 0
        return f"values differ (largest difference {diff:g}; allowed rtol {RTOL:g}, atol {ATOL:g})"
    return None if eager == loaded else "values differ"


def compare(manifest, eager, loaded):
    """Messages for every output of every example that differs."""
    names = [o["name"] for o in manifest["outputs"]]
    problems = []
    for i, (want, got) in enumerate(zip(eager, loaded)):
        for name, w, g in zip(names, want, got):
            why = _values_differ(w, g)
            if why:
                problems.append(f"output '{name}' of example {i}: {why}")
    return problems


_UNSIGNED = ("UINT16", "UINT32", "UINT64")  # arrive widened to signed types (datatypes.cc)


def signature_problems(manifest, loaded):
    """Messages for every output of every example whose datatype or shape
    breaks the manifest (what the server would answer INTERNAL)."""
    problems = []
    batch = manifest.get("max_batch_size", 0)
    for i, values in enumerate(loaded):
        for k, (spec, value) in enumerate(zip(manifest["outputs"], values)):
            field = f"outputs[{k}]"
            try:
                datatype, shape = value_specs.value_spec(value, field)
                if spec["datatype"] in _UNSIGNED and isinstance(value, torch.Tensor) and \
                        not value.is_floating_point() and value.dtype != torch.bool:
                    datatype = spec["datatype"]
                shape = value_specs.strip_batch(shape, batch, None, field)
                value_specs.check_declared(field, spec, datatype, shape,
                                            "the loaded model returned", "the loaded model returned")
            except ValueError as e:
                problems.append(f"output '{spec['name']}' of example {i}: {e}")
    return problems


def _hint(result, file_uses):
    kind, message = result.get("type", ""), result.get("message", "")
    if kind == "MissingModulesError":
        return (" (the check runs the server's Python isolated, as the server's interpreters "
                "are: no PYTHONPATH, no user site-packages)")
    if kind in ("FileNotFoundError", "NotADirectoryError", "IsADirectoryError") and file_uses:
        where = ", ".join(f"{f}:{n}" for f, n in file_uses[:3])
        return (f". The archive's code finds files through __file__ ({where}), but an "
                f"archived module has no folder on disk, so files next to it are not there "
                f"when the server loads it: read the file while building the model (in "
                f"__init__ or the factory, packaged with the default --pickle kind: the data "
                f"is pickled with the model), or keep its content in the module's source")
    if kind == "ModuleNotFoundError" and "self-contained archive" in message:
        return (". torch.package leaves out a module it cannot import when packaging: "
                "install it where you package (and on the server) so it is extern, or import "
                "it inside try/except ImportError if the model can run without it")
    if kind in ("KeyError", "AttributeError") and "torch_package_" in message:
        return (". The code looks its module up by name; archived modules live under a "
                "mangled name")
    return ""


def check_loads(path, examples=None, eager=None, manifest=None, display_path=None,
                file_uses=(), timeout=600):
    """Loads the archive `path` in a fresh server Python as the server does,
    warms it up, runs `examples` (a list of positional-argument tuples) and,
    when `eager` (their outputs, per example a list in manifest order) is
    given, compares. Returns the loaded outputs per example. Messages name
    `display_path` (default: path). Raises LoadCheckError."""
    display_path = display_path or os.fspath(path)
    manifest = manifest or host.read_manifest(path)
    work = tempfile.mkdtemp(prefix="manypy-load-check-")
    try:
        request = {"archive": os.path.abspath(os.fspath(path)), "display": display_path,
                   "runtime_folder": os.path.dirname(manypy_model_runtime.__path__[0]),
                   "serving": os.path.abspath(serving.__file__),
                   "examples": None, "outputs": os.path.join(work, "outputs.pt"),
                   "result": os.path.join(work, "result.json")}
        if examples:
            request["examples"] = os.path.join(work, "examples.pt")
            torch.save([list(args) for args in examples], request["examples"])
        with open(os.path.join(work, "request.json"), "w") as f:
            json.dump(request, f)
        command = [server_python(), "-I", _CHILD, os.path.join(work, "request.json")]
        try:
            proc = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise LoadCheckError(f"load check: {display_path} did not load and run its examples "
                                 f"within {timeout} s in a fresh {server_python()}; "
                                 f"{SKIP_HINT}") from None
        except OSError as e:
            raise LoadCheckError(f"load check: cannot start {server_python()} ({e}); set "
                                 f"${SERVER_PYTHON_ENV} to the server's Python, or "
                                 f"{SKIP_HINT}") from None
        if not os.path.exists(request["result"]):
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
            raise LoadCheckError(f"load check: the fresh {server_python()} loading {display_path} "
                                 f"ended with status {proc.returncode} before it answered: "
                                 f"{' | '.join(tail) or 'no output'}")
        with open(request["result"]) as f:
            result = json.load(f)
        if not result.get("ok"):
            where = archive_traceback.describe(result.get("traceback", ""))
            raise LoadCheckError(
                f"load check: {display_path} fails in the server's loader ({result['stage']}): "
                f"{result['type']}: {result['message']}{where}{_hint(result, list(file_uses))}")
        if result.get("device_note"):
            warnings.warn(f"load check: {display_path} {result['device_note']}", stacklevel=2)
        # Written by its own child process (outputs may hold bytes, which
        # PyTorch 2.6's default weights_only refuses).
        loaded = torch.load(request["outputs"], weights_only=False) if examples else []
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if eager is not None:
        problems = compare(manifest, eager, loaded)
        if problems:
            raise LoadCheckError(
                f"load check: {display_path} loads, but the loaded model's outputs differ from "
                f"the eager model's: {'; '.join(problems[:4])}"
                f"{f' (and {len(problems) - 4} more)' if len(problems) > 4 else ''}. A model "
                f"that depends on state not in the archive (module globals set after import, "
                f"randomness, files) gives other results in the server")
    return loaded
