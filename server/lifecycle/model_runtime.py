# Runs inside every manypy interpreter: loads a model archive with
# torch.package, taking tensor storages from the host's single mapping of the
# archive (so all interpreters share one copy of the weights), and calls it.
import collections.abc
import functools
import importlib
import importlib.util
import linecache
import os
import re
import shutil
import sys
import sysconfig
import weakref

import torch
from torch.package import PackageImporter


class MissingModulesError(ImportError):
    """The archive needs modules from the server's Python (its extern
    modules) that cannot be imported here. PythonModel::Load turns it into
    FAILED_PRECONDITION."""


def check_extern_modules(importer, path):
    """Imports every module the archive expects the server to provide
    (torch.package's .data/extern_modules), so that a missing one fails the
    load, naming all of them, before any request. Modules the archive lists
    as optional (manypy/optional_modules: imported only inside try/except
    ImportError) are left to the model's own fallback."""
    missing = []
    optional = _optional_modules(importer)
    for name in importer.extern_modules:
        if name in optional:
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # ImportError, or a module that raises as it is imported
            missing.append(f"{name} ({type(e).__name__}: {e})")
    if missing:
        raise MissingModulesError(
            f"archive {path} needs {len(missing)} module(s) that this server's Python cannot "
            f"import: {'; '.join(missing)}. Install them where the server runs, or package "
            f"them into the archive (export(..., intern=[...]))")


class CompileToolchainError(RuntimeError):
    """A torch.compile'd model on a server that lacks what Inductor compiles
    its kernels with. PythonModel::Load turns it into FAILED_PRECONDITION."""


OPTIONAL_MODULES_RECORD = "manypy/optional_modules"
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


def _optional_modules(importer):
    reader = importer.zip_reader
    if not reader.has_record(OPTIONAL_MODULES_RECORD):  # archives made before it existed
        return set()
    return set(reader.get_record(OPTIONAL_MODULES_RECORD).decode("utf-8").split())


def _forget_module(name):
    sys.modules.pop(name, None)


class ArchiveImporter(PackageImporter):
    """torch.package's importer, with each of the archive's modules also in
    sys.modules under its own (unique, mangled) name while it lives.

    Module-level code that looks its module up by name finds it: dataclasses
    with `from __future__ import annotations` (sys.modules.get(cls.__module__)
    .__dict__; without this, "'NoneType' object has no attribute '__dict__'"),
    typing.get_type_hints, pydantic-style classes. The entry is a weak proxy,
    removed when the module is freed, so a model's modules still go with the
    model. Installed from _install_on_parent, the one hook torch.package calls
    after naming a module and before running its code."""

    def _install_on_parent(self, parent, name, module):
        mangled = module.__name__
        if getattr(module, "__loader__", None) is self and mangled not in sys.modules:
            sys.modules[mangled] = weakref.proxy(module)
            weakref.finalize(module, _forget_module, mangled)
        super()._install_on_parent(parent, name, module)


class SharedStorageReader:
    """A torch.package zip reader whose storages are the host's tensors.

    PackageImporter.load_pickle fetches every storage through
    get_storage_from_record(name, numel, dtype) and only needs a tensor back;
    everything else is delegated to torch's own reader."""

    def __init__(self, reader, storages):
        self._reader = reader
        self._storages = storages

    def get_storage_from_record(self, name, numel, dtype):
        raw = self._storages.get(name)
        if raw is None:
            raise RuntimeError(f"archive storage {name!r} was not mapped by the host")
        tensor = raw.view(dtype)  # a view over the same bytes: no copy
        if tensor.numel() != numel:
            raise RuntimeError(
                f"archive storage {name!r} holds {tensor.numel()} elements of {dtype}, "
                f"the pickle expects {numel}")
        return tensor

    def __getattr__(self, attribute):
        return getattr(self._reader, attribute)


def _assign_state(model, state):
    """Makes the model's parameters and buffers the given (shared) tensors,
    by name, instead of copying into them as load_state_dict would. A
    torch.compile'd model's (an OptimizedModule) are those of the module it
    wraps, named as that module names them."""
    original = getattr(model, "_orig_mod", None)
    if isinstance(original, torch.nn.Module):
        model = original
    own = dict(model.named_parameters())
    own.update(dict(model.named_buffers()))
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise RuntimeError(f"weights do not match the model: missing {missing}, unexpected {unexpected}")
    for name, tensor in state.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = model.get_submodule(owner_name) if owner_name else model
        if leaf in owner._parameters:
            owner._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
        else:
            owner._buffers[leaf] = tensor


# The model each interpreter is running now (one call at a time per
# interpreter), and every loaded model's name: for the os._exit log line.
_running = None
_names = weakref.WeakKeyDictionary()  # does not keep an unloaded model alive
_server_pid = None


def _log_line(message, model):
    """One ERROR line as the server's log writes it (server/log.cc): text, or
    with --log-format=json (which manypy-server puts in MANYPY_LOG_FORMAT
    before the interpreters start) one JSON object with the model's name."""
    import os
    if os.environ.get("MANYPY_LOG_FORMAT") != "json":
        return f"manypy-server: ERROR {message}\n"
    import datetime
    import json
    now = datetime.datetime.now(datetime.timezone.utc)
    ts = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    return json.dumps({"ts": ts, "level": "ERROR", "msg": message, "model": model}) + "\n"


def _guard_os_exit():
    """Wraps this interpreter's os._exit so that a model calling it leaves one
    clear line on stderr before the process ends, instead of a server that
    silently vanishes. It still exits: os._exit promises no return, code after
    it assumes none, and it is how a forked child (multiprocessing, a
    DataLoader worker) ends without running the server's cleanup; refusing it
    there would leave a second copy of the server running. A forked child
    exits silently."""
    global _server_pid
    if _server_pid is not None:
        return
    import os
    import sys
    _server_pid = os.getpid()
    real_exit = os._exit

    def _exit(status):
        if os.getpid() == _server_pid:
            where = ""
            frame = sys._getframe(1)
            if frame is not None:
                where = f" at {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
            try:
                model = _names.get(_running, "?")
            except TypeError:  # not weakly referenceable, or nothing running
                model = "?"
            try:
                sys.stderr.write(_log_line(
                    f"model '{model}' called os._exit({status}){where}: the server process "
                    f"exits now, and every request in flight is lost", model))
                sys.stderr.flush()
            except Exception:  # the exit matters more than the line
                pass
        real_exit(status)

    os._exit = _exit


def _weak_source(importer_ref, module_name):
    importer = importer_ref()
    return None if importer is None else importer.get_source(module_name)


def _drop_lines(filenames):
    for filename in filenames:
        if len(linecache.cache.get(filename, ())) == 1:
            del linecache.cache[filename]


def _hold_weakly_in_linecache(importer):
    """torch.package puts every module it makes in linecache.lazycache,
    whose entry holds importer.get_source: the importer, its modules and its
    storages then live as long as the process, one more copy per load (make
    soak: text_classifier grew the server ~0.85 MiB per reload). Keeps the
    entries, so tracebacks still show the model's source, over a weak
    reference, and drops them with the importer."""
    importer_ref, filenames = weakref.ref(importer), []
    for filename, entry in list(linecache.cache.items()):
        get_lines = entry[0] if len(entry) == 1 else None
        module_name = _lazy_module_name(get_lines, importer)
        if module_name is not None:
            linecache.cache[filename] = (functools.partial(_weak_source, importer_ref,
                                                           module_name),)
            filenames.append(filename)
    weakref.finalize(importer, _drop_lines, filenames)


def _lazy_module_name(get_lines, importer):
    """The module name a linecache.lazycache entry reads through
    importer.get_source, or None when the entry is not the importer's.
    Python 3.11 stores functools.partial(get_source, name); 3.13 a closure
    get_lines(name=name) over get_source."""
    if getattr(getattr(get_lines, "func", None), "__self__", None) is importer:
        return get_lines.args[0]
    cells = getattr(get_lines, "__closure__", None) or ()
    defaults = getattr(get_lines, "__defaults__", None) or ()
    for cell in cells:
        try:
            bound = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if getattr(bound, "__self__", None) is importer and defaults:
            return defaults[0]
    return None


def _bind_server_api(importer, api):
    """The archive's `manypy` package (the packager's mock of it, or just the
    folder of its manifest and weights, which the importer reads as that
    package's resources) gets the server's functions: a model's `import
    manypy` then calls the server."""
    try:
        package = importer.import_module("manypy")
    except ModuleNotFoundError:
        return
    for name in getattr(api, "__all__", ()):
        setattr(package, name, getattr(api, name))


def load(path, entry_point, storages, device="cpu", source=None, name=None):
    """Loads the model archived at `path` (named in messages), reading its
    code and pickles from `source` (the host's sealed copy of the archive)
    when given."""
    _guard_os_exit()
    api = _serving_api()
    if api is not None:
        api._enter(name or path)  # its import-time log lines name it
    importer = ArchiveImporter(source or path)
    if api is not None:
        _bind_server_api(importer, api)
    check_extern_modules(importer, path)
    importer.zip_reader = SharedStorageReader(importer.zip_reader, storages)
    kind = entry_point["kind"]
    if kind == "pickle":
        model = importer.load_pickle(entry_point["package"], entry_point["resource"])
    elif kind == "factory":
        module = importer.import_module(entry_point["module"])
        model = getattr(module, entry_point["function"])()
        if entry_point.get("weights_resource"):
            state = importer.load_pickle(entry_point["weights_package"],
                                         entry_point["weights_resource"])
            _assign_state(model, state)
    else:
        raise ValueError(f"unknown entry point kind {kind!r}")
    _hold_weakly_in_linecache(importer)
    if _holds_compiled_module(model):
        _check_compile_toolchain(name or path)
        _track_recompiles()
        _threads_at_run_time()
        _compiled.add(model)
    if isinstance(model, torch.nn.Module):
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        if device != "cpu":
            # Each interpreter moves its own copy: weights are shared on the
            # host, not on the device (one CUDA context serves them all).
            model.to(device)
    try:
        _names[model] = name or path
    except TypeError:  # an object that cannot be weakly referenced keeps "?"
        pass
    return model


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


def _storage_of(tensor):
    untyped = getattr(tensor, "untyped_storage", None)  # PyTorch 2.x
    return untyped() if untyped is not None else tensor.storage()


def owned_tensor_bytes(model, storages):
    """Bytes of the model's parameters and buffers that are not mapped from the
    archive (`storages`, the host's tensors): tensors its code made at load.
    libtorch holds them, so the host's tracemalloc count of the model's Python
    objects does not see them. Each storage is counted once."""
    if not isinstance(model, torch.nn.Module):
        return 0
    mapped = {_storage_of(t).data_ptr() for t in storages.values()}
    seen = set()
    total = 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        storage = _storage_of(tensor)
        pointer = storage.data_ptr()
        if pointer in mapped or pointer in seen:
            continue
        seen.add(pointer)
        total += storage.nbytes()
    return total


class ModelOutputError(RuntimeError):
    """The model's result does not give the outputs its manifest declares
    (the server answers INTERNAL naming the output)."""


_INDEX_SUFFIX = re.compile(r"__([0-9]+)$")


def _is_bytes_list(value):
    return isinstance(value, list) and all(
        isinstance(v, (bytes, bytearray, str)) or _is_bytes_list(v) for v in value)


def _as_output_list(result, output_names):
    """The declared outputs, in manifest order, from what the model returned:
    a dict (by key; also a list or tuple holding one dict, as torchvision's
    detectors return), a tuple or list (by position, or by the NAME__<index>
    suffix when the manifest declares fewer outputs than the result has
    elements: elements that were None at export are not declared), or one
    value. A declared output that is None is an error naming it."""
    if isinstance(result, (tuple, list)) and result and all(isinstance(r, dict) for r in result):
        if len(result) != 1:
            raise ModelOutputError(
                f"the model returned a {type(result).__name__} of {len(result)} dicts; the "
                f"manifest's outputs {output_names} are read from one dict (one input item per call)")
        result = result[0]
    if isinstance(result, dict):
        missing = [n for n in output_names if n not in result]
        if missing:
            raise ModelOutputError(f"the model's result has no output(s) {missing}; it returned "
                                   f"keys {sorted(result)}")
        values = [result[n] for n in output_names]
    elif isinstance(result, (tuple, list)) and not (len(output_names) == 1 and _is_bytes_list(result)):
        if len(result) == len(output_names):
            values = list(result)
        else:
            positions = []
            for n in output_names:
                m = _INDEX_SUFFIX.search(n)
                positions.append(int(m.group(1)) if m else None)
            if any(p is None or p >= len(result) for p in positions):
                raise ModelOutputError(
                    f"the model returned {len(result)} values, the manifest declares "
                    f"{len(output_names)} outputs {output_names} (an output named NAME__<index> "
                    f"takes that element)")
            values = [result[p] for p in positions]
    else:
        if len(output_names) != 1:
            raise ModelOutputError(f"the model returned one value, the manifest declares "
                                   f"{len(output_names)} outputs {output_names}")
        values = [result]
    for name, value in zip(output_names, values):
        if value is None:
            raise ModelOutputError(f"output '{name}' is None: the model returned None where "
                                   f"its manifest declares a tensor")
    return values


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


# The module that stands in for the server's `manypy` where there is no
# server (the packager's load check sets it); None: sys.modules' "manypy".
api_override = None


def _serving_api():
    """The server's `manypy` module (server/core/manypy_module.py), or None
    where the host defines none (the interpreter layer's own tests)."""
    api = api_override if api_override is not None else sys.modules.get("manypy")
    return api if hasattr(api, "_begin") else None


def drop_sequence_states(load, keys):
    """Drops the per-sequence states (manypy.request.state) of the model load
    `load` named by `keys` (None: all of that load's), as sequences end, time
    out, or the model is released from this interpreter."""
    api = _serving_api()
    if api is not None and hasattr(api, "_drop_states"):
        api._drop_states(load, keys)


def _enter(model):
    """A call of `model` starts on this thread: the server's module learns
    which model its calls and log lines come from."""
    api = _serving_api()
    if api is not None:
        try:
            api._begin(_names.get(model, "?"))
        except TypeError:  # not weakly referenceable
            api._begin("?")
    return api


def _leave(api):
    # Calls it submitted and never waited for belong to its clients: wait now.
    if api is not None:
        api._end()


def infer(model, method, output_names, device, batched, inputs):
    """Calls the model with the inputs in manifest order and returns the
    outputs as a list in manifest order (on the CPU). `batched`: the inputs'
    first dimension is the batch."""
    global _running
    call = model if not method or method == "forward" else getattr(model, method)
    if device != "cpu":
        inputs = [_to(i, device) for i in inputs]
    compiled = _compiled and is_compiled(model)
    if compiled:
        recompiled_before = len(_recompiles)
        if batched:
            _mark_batch_dynamic(inputs)
    _running = model
    api = _enter(model)
    try:
        if torch.is_inference_mode_enabled():  # a nested call: its caller's mode holds
            result = call(*inputs)
        else:
            with torch.inference_mode():
                result = call(*inputs)
    finally:
        _running = None
        _leave(api)
        if compiled and len(_recompiles) > recompiled_before:
            _report_recompiles(recompiled_before)
    outputs = _as_output_list(result, output_names)
    if device != "cpu":
        outputs = [_to(o, "cpu") for o in outputs]
    return outputs


def _is_stream(result):
    return isinstance(result, collections.abc.Iterator) and not isinstance(result, torch.Tensor)


class Stream:
    """One request to a streaming model: its generator (or iterator), read
    one response at a time by the worker that runs it. The call lasts from
    the first call to the stream's end (or close): the calls it submits
    (manypy.submit) may be waited for across its yields."""

    def __init__(self, model, method, output_names, device, batched, inputs):
        global _running
        call = model if not method or method == "forward" else getattr(model, method)
        if device != "cpu":
            inputs = [_to(i, device) for i in inputs]
        self._model = model
        self._output_names = output_names
        self._device = device
        self._responses = None
        _running = model
        self._api = _enter(model)
        try:
            with torch.inference_mode():
                result = call(*inputs)
            if not _is_stream(result):
                raise ModelOutputError(
                    f"the manifest says the model streams, but it returned a "
                    f"{type(result).__name__} (a streaming model's method is a generator or "
                    f"returns an iterator)")
        except BaseException:
            self._end()
            raise
        finally:
            _running = None
        self._responses = result

    def _end(self):
        api, self._api = self._api, None
        _leave(api)

    def next(self):
        """The next response's outputs in manifest order (on the CPU), or
        None when the stream has ended."""
        global _running
        _running = self._model
        try:
            with torch.inference_mode():
                response = next(self._responses)
        except StopIteration:
            self._end()
            return None
        except BaseException:
            self._end()
            raise
        finally:
            _running = None
        outputs = _as_output_list(response, self._output_names)
        if self._device != "cpu":
            outputs = [_to(o, "cpu") for o in outputs]
        return outputs

    def close(self):
        """Ends the stream early (the client left): a generator gets
        GeneratorExit at its yield and runs its finally blocks."""
        close = getattr(self._responses, "close", None)
        try:
            if close is not None:
                with torch.inference_mode():
                    close()
        finally:
            self._end()


def start_stream(model, method, output_names, device, batched, inputs):
    """Calls a streaming model with the inputs in manifest order: its Stream."""
    return Stream(model, method, output_names, device, batched, inputs)
