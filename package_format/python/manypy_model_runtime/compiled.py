# torch.compile'd models (PyTorch 2.x) in an interpreter: importing the
# compiler before a model's heap is measured, refusing a server without the
# toolchain Inductor compiles with, and counting recompilations.
import ctypes
import functools
import hashlib
import importlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import threading
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
    _vector_isa_without_subprocess_checks()
    _torch_key_kept_in_cache()
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
    # torch 2.6: get_and_maybe_log_recompilation_reason(cache_entry, frame);
    # 2.14: get_and_maybe_log_recompilation_reasons(cache_entries, frame,
    # backend, skip_logging=False), from torch/_dynamo/guards.py:5570,
    # imported into convert_frame (convert_frame.py:134, called at :1978).
    name = "get_and_maybe_log_recompilation_reason"
    if not hasattr(convert_frame, name):
        name += "s"
    reasons_of = getattr(convert_frame, name)

    def tracked(cache_entry, frame, *args, **kwargs):
        reasons = reasons_of(cache_entry, frame, *args, **kwargs)
        where = f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_code.co_firstlineno})"
        _recompiles.append(f"{where}: {reasons[-1] if reasons else 'no guard failure recorded'}")
        return reasons

    setattr(convert_frame, name, tracked)
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


def _sleef_header():
    """Where <sleef.h> is, or None: ATen's vector classes include it."""
    torch_include = os.path.join(os.path.dirname(torch.__file__), "include")
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""  # Debian's: x86_64-linux-gnu
    for folder in (torch_include, sysconfig.get_paths()["include"], "/usr/local/include",
                   os.path.join("/usr/include", multiarch), "/usr/include"):
        if os.path.exists(os.path.join(folder, "sleef.h")):
            return folder
    return None


def _vector_isa_without_subprocess_checks():
    """Lets Inductor vectorize its kernels (AVX-512, AVX2) without its own
    check, which costs every interpreter seconds at every start and fails
    here anyway. Inductor (2.6 torch/_inductor/cpu_vec_isa.py, check_build)
    accepts an ISA only after compiling a test file with ATen's vector
    headers and loading it in a new Python process that imports torch, one
    per ISA the CPU lists, at every process start (only the compile is
    cached); Debian's libtorch_cpu links SLEEF as a shared library, which
    the test library (and every kernel) uses without being linked to it, so
    the load fails, every ISA is refused and the kernels are scalar.
    With SLEEF's header present (libsleef-dev), this trusts the CPU's flags
    as Inductor reads them (config.cpp.vec_isa_ok) and puts the SLEEF that
    libtorch_cpu loaded in the global scope, where the kernels' references
    resolve (already so in manypy-server, which links libtorch_cpu). Without
    the header nothing changes: Inductor's check fails at the compile."""
    if _sleef_header() is None:
        return
    try:  # already loaded by libtorch_cpu: RTLD_NOLOAD only promotes it
        ctypes.CDLL("libsleef.so.3", mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
    except OSError:
        pass  # a torch with SLEEF linked in (PyPI's wheels) exports it itself
    config = importlib.import_module("torch._inductor.config")
    config.cpp.vec_isa_ok = True


def _torch_key_kept_in_cache():
    """Keeps Inductor's torch_key in its cache folder, computed once per
    installation of torch instead of once per interpreter per start.
    torch_key (2.6 torch/_inductor/codecache.py:712-744) reads and hashes
    every module of torch (its .py files and its extension modules' .so,
    about 40 MB) for the FX graph cache's key (codecache.py:861), in every
    process: 0.6-1.0 s of every interpreter's first compile, a third of a
    warm restart's cache lookups. The kept key is named by a fingerprint of
    torch's files (path, size, modification time of each: what CPython's own
    .pyc check trusts, PEP 552), which any changed, added or removed file
    changes; walking them costs about 0.05 s. The key itself is still
    torch's, computed by torch_key where no file names the fingerprint."""
    codecache = importlib.import_module("torch._inductor.codecache")
    if getattr(codecache, "_manypy_keeps_torch_key", False):
        return
    compute = codecache.torch_key
    cache_dir = importlib.import_module("torch._inductor.runtime.cache_dir_utils").cache_dir

    @functools.lru_cache(None)
    def torch_key():
        folder = os.path.join(cache_dir(), "manypy_torch_key")
        path = os.path.join(folder, _files_fingerprint(codecache._TORCH_PATH))
        try:
            with open(path, "rb") as f:
                key = f.read()
            if len(key) == hashlib.sha256().digest_size:
                return key
        except OSError:
            pass  # not kept yet (or unreadable): compute it
        key = compute()
        try:
            os.makedirs(folder, exist_ok=True)
            temporary = f"{path}.{os.getpid()}.{threading.get_native_id()}"  # interpreters share the pid
            with open(temporary, "wb") as f:
                f.write(key)
            os.replace(temporary, path)  # whole or absent for a reader
        except OSError:
            pass  # a read-only cache: computed again at the next start
        return key

    codecache.torch_key = torch_key
    codecache._manypy_keeps_torch_key = True


def _files_fingerprint(root):
    """A hex digest of the path, size and modification time of every file
    under `root`."""
    digest = hashlib.sha256(torch.__version__.encode())
    folders = [root]
    while folders:
        folder = folders.pop()
        with os.scandir(folder) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                    continue
                stat = entry.stat()
                digest.update(f"{entry.path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()


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

