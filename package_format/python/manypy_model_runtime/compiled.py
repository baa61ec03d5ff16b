# torch.compile'd models (PyTorch 2.x) in an interpreter: importing the
# compiler before a model's heap is measured, refusing a server without the
# toolchain Inductor compiles with, and counting recompilations.
import importlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import weakref

import torch

from manypy_model_runtime.errors import CompileToolchainError


def import_compiler():
    """Imports torch's compiler (Dynamo, Inductor) for an archive whose code
    calls torch.compile (manypy/uses_torch_compile; PythonModel::Prepare
    asks): before the host measures the model's Python heap with
    tracemalloc, which made that import take 6 s instead of 1.2; and what it
    builds is shared by every compiled model of the interpreter, like torch
    itself."""
    # What torch.compile imports: wrapping a function runs it all (Dynamo,
    # the backend's registry, Inductor's config); nothing is compiled until
    # the wrapper's first call, which never comes.
    torch.compile(_identity)


def _identity(x):
    return x


# torch.compile'd models (PyTorch 2.x): the models of this interpreter that
# are, or hold, a module torch.compile made; and the recompilations Dynamo
# made here, appended as they happen (_track_recompiles).
_compiled = weakref.WeakSet()
_recompiles = []


def _holds_compiled_module(model):
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    if eval_frame is None or not hasattr(eval_frame, "OptimizedModule"):
        return False  # nothing compiled in this interpreter yet (or lazy: never run)
    if not isinstance(model, torch.nn.Module):
        return False
    return any(isinstance(m, eval_frame.OptimizedModule) for m in model.modules())


def track_if_compiled(model, name):
    """For a loaded model that is, or holds, a torch.compile'd module:
    refuses a server without Inductor's toolchain, then tracks the model and
    its recompilations and has its kernels follow this interpreter's threads."""
    if not _holds_compiled_module(model):
        return
    _check_compile_toolchain(name)
    _track_recompiles()
    _threads_at_run_time()
    _compiled.add(model)


def _check_compile_toolchain(name):
    """Inductor compiles a compiled model's kernels (C++) at its first calls,
    here at load: refuse the model now, naming what is missing, rather than
    fail its warm-up deep inside Inductor."""
    missing = []
    compiler = os.environ.get("CXX") or "g++"
    if shutil.which(compiler) is None:
        missing.append(f"a C++ compiler ({compiler}: Debian's g++)")
    if importlib.util.find_spec("setuptools") is None:
        missing.append("setuptools (Debian's python3-setuptools; Inductor imports "
                       "torch.utils.cpp_extension)")
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        missing.append(f"the Python headers ({include}/Python.h: Debian's "
                       f"libpython{sysconfig.get_python_version()}-dev)")
    if missing:
        raise CompileToolchainError(
            f"model {name} is compiled with torch.compile, whose kernels Inductor compiles "
            f"when the model loads, but this server lacks {'; '.join(missing)} "
            f"(tools/debian-packages.txt installs them)")


def _track_recompiles():
    """Makes every recompilation in this interpreter append its reason to
    _recompiles: Dynamo asks get_and_maybe_log_recompilation_reason for the
    guards that failed whenever it compiles a frame again (torch 2.x's
    torch/_dynamo/convert_frame.py)."""
    convert_frame = importlib.import_module("torch._dynamo.convert_frame")
    if getattr(convert_frame, "_manypy_tracks_recompiles", False):
        return
    reasons_of = convert_frame.get_and_maybe_log_recompilation_reason

    def tracked(cache_entry, frame):
        reasons = reasons_of(cache_entry, frame)
        where = f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_code.co_firstlineno})"
        _recompiles.append(f"{where}: {reasons[-1] if reasons else 'no guard failure recorded'}")
        return reasons

    convert_frame.get_and_maybe_log_recompilation_reason = tracked
    convert_frame._manypy_tracks_recompiles = True


def _threads_at_run_time():
    """Inductor writes the intra-op thread count of the compiling process
    into its C++ kernels (`#pragma omp parallel num_threads(N)`) unless
    cpp.dynamic_threads: then they ask OpenMP when they run. The server sets
    the threads per interpreter (interpreters x threads = cores), and a
    kernel from the shared on-disk cache may have been compiled by a start
    with other settings: kernels must follow this one's."""
    config = importlib.import_module("torch._inductor.config")
    config.cpp.dynamic_threads = True


def is_compiled(model):
    """Whether `model` is a torch.compile'd model (its warm-up compiles it)."""
    try:
        return model in _compiled
    except TypeError:
        return False


def _report_recompiles(since):
    """Tells the host about the recompilations since index `since`: counted
    when they happened during a request (manypy_model_recompiles_total)."""
    reasons = _recompiles[since:]
    del _recompiles[since:]
    try:
        import _manypy
    except ImportError:
        return  # no host: the packager's load check runs this in plain Python
    for reason in reasons:
        try:
            _manypy.call_host("compile.recompiled", {"model": "", "version": "", "reason": reason})
        except _manypy.HostError:
            pass  # a host without the service (the interpreter layer's tests)


def _mark_batch_dynamic(inputs):
    """The batch dimension of a compiled model's inputs is symbolic from the
    first batch of 2 on: dynamic batching then reuses one graph for every
    size (batch 1 has a graph of its own: Dynamo specialises sizes 0 and 1)."""
    mark = torch._dynamo.maybe_mark_dynamic
    for tensor in inputs:
        if isinstance(tensor, torch.Tensor) and tensor.dim() > 0:
            mark(tensor, 0)

