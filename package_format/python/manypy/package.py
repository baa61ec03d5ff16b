"""Export PyTorch models as manypy model archives (package_format/SCHEMA.md).

An archive is a ``torch.package`` zip: the model's own modules are interned
(their source ships in the archive); every module installed in this Python
(torch, numpy, torchvision, the standard library and anything else in its
site-packages / dist-packages folders) is extern: the server's Python must
provide it, and the server refuses, naming them, an archive whose extern
modules it cannot import. Tensor storages are stored uncompressed
and 64-byte aligned by torch.package's writer, and ``manypy/manifest.json``
describes the entry point and the input/output signature.

    import manypy.package
    manypy.package.export(model, "net.mpk", name="net",
                          inputs=[("INPUT__0", "FP32", [16])],
                          example_inputs=(torch.randn(1, 16),), max_batch_size=8)

Public API: export, export_factory, load_model, read_manifest,
archive_entries, check_archive, example_inputs_for, datatype_of.
"""

import collections.abc
import importlib
import importlib.util
import inspect
import itertools
import io
import json
import os
import re
import shutil
import site
import struct
import sys
import tempfile
import types
import warnings
import zipfile

import torch
from torch.package import PackageExporter, PackageImporter
from torch.package.package_exporter import PackagingError, _ModuleProviderAction

from . import manifest as _manifest
from . import server_runtime as _server_runtime
from . import source_scan as _source_scan

# Always provided by the server's Python, never copied into an archive. sys
# and io are not implicitly extern in torch.package (its _DISALLOWED_MODULES),
# but every manypy interpreter is a real CPython with its own sys and io.
DEFAULT_EXTERN = (
    "torch", "torch.**", "numpy", "numpy.**", "torchvision", "torchvision.**",
    "sys", "io",
)
# What a model calls of the server (manypy.infer, request, log): mocked in the
# archive (which keeps its manifest under manypy/, so manypy cannot be
# extern), and replaced at load by the server's own module (model_runtime.py).
SERVER_API_MODULES = ("manypy", "manypy.**")
DEFAULT_INTERN = ("**",)
# Folders whose modules count as installed (so extern by default): besides
# site.getsitepackages() and the user's site folder, any sys.path entry with
# one of these names (a virtualenv's, or a folder set up as one).
SITE_FOLDER_NAMES = ("site-packages", "dist-packages")

PICKLE_PACKAGE, PICKLE_RESOURCE = "model", "model.pkl"
WEIGHTS_PACKAGE, WEIGHTS_RESOURCE = "manypy", "weights.pkl"
# Extern modules that only imports inside try/except ImportError need, one a
# line; the server loads the archive without them (model_runtime.py).
OPTIONAL_MODULES_PACKAGE, OPTIONAL_MODULES_RESOURCE = "manypy", "optional_modules"
# Present when the archive's code calls torch.compile (SCHEMA.md).
USES_COMPILE_PACKAGE, USES_COMPILE_RESOURCE = "manypy", "uses_torch_compile"
STORAGE_ALIGNMENT = 64

_DTYPE_TO_DATATYPE = {
    torch.bool: "BOOL", torch.uint8: "UINT8", torch.int8: "INT8",
    torch.int16: "INT16", torch.int32: "INT32", torch.int64: "INT64",
    torch.float16: "FP16", torch.bfloat16: "BF16", torch.float32: "FP32",
    torch.float64: "FP64",
}
for _name, _dt in (("uint16", "UINT16"), ("uint32", "UINT32"), ("uint64", "UINT64")):
    if hasattr(torch, _name):  # torch >= 2.3 only
        _DTYPE_TO_DATATYPE[getattr(torch, _name)] = _dt
_DATATYPE_TO_DTYPE = {v: k for k, v in _DTYPE_TO_DATATYPE.items()}


def datatype_of(dtype):
    """The Open Inference Protocol datatype name of a torch dtype."""
    try:
        return _DTYPE_TO_DATATYPE[dtype]
    except KeyError:
        raise ValueError(f"torch dtype {dtype} has no manypy datatype") from None


# ---------------------------------------------------------------------------
# Export


def export(model, path, name=None, version=1, inputs=None, outputs=None,
           example_inputs=None, max_batch_size=0, batching=None,
           instance_count=0, device="cpu", description="", intern=None,
           extern=None, method=None, modules=None, more_example_inputs=None,
           dynamic_dims=None, streaming=None, load_check=True, response_cache=False,
           sequence_batching=None, format="python"):
    """Writes ``model`` to the archive ``path`` with entry point kind "pickle".

    format "aoti" writes an AOTInductor archive instead (platform torch_aoti,
    manypy.aoti.export: torch.export, compiled ahead of time, run by the
    server's libtorch without Python); the Python-only arguments (intern,
    extern, modules, streaming, sequence_batching) are refused with it.

    name defaults to the file name without extension. inputs/outputs are
    lists of {"name","datatype","shape"} dicts or (name, datatype, shape)
    tuples; shapes leave out the batch dimension when max_batch_size > 0.
    example_inputs (a tuple of positional arguments, or one tensor; BYTES
    inputs as nested lists of bytes) is run once under torch.inference_mode():
    it fills in outputs when outputs is None (and inputs when inputs is None)
    and otherwise checks that the declared signature matches.
    more_example_inputs is a list of further examples, each run the same way:
    dimensions that differ between the examples (or are 0 in one) become -1
    (variable). dynamic_dims ({tensor name: [dimension, ...]}, batch dimension
    excluded) marks dimensions -1 explicitly, e.g. {"boxes": [0]}. An output
    that is None for an example is left out of the signature (with a
    warning); a tuple's outputs keep their position in their names
    (OUTPUT__<index>), which is how the server finds them. The model may
    return a tensor, a tuple or list, a dict, or a list holding one dict
    (torchvision's detectors): a dict's keys name its outputs. batching is a
    dict (SCHEMA.md), True/False for dynamic on/off, or None. intern/extern
    are extra torch.package patterns, applied before the defaults: every
    module installed in this Python (installed_modules(), the standard
    library, torch, numpy, torchvision) is extern and the rest, the user's
    own code, is interned ("**"); nothing is mocked. An intern pattern can
    take an installed package into the archive. method names the attribute the
    server calls (default: model(...)). modules lists extra module names or
    objects to intern with their dependencies, e.g. the module that built a
    model whose classes live elsewhere. streaming (None: detected) says
    whether the method yields its responses (SCHEMA.md): it is detected when
    the method is a generator function or returns an iterator for the
    examples, whose yielded values then give the outputs' signature.
    response_cache lets a server started with --response-cache-bytes answer
    a request equal to an earlier one from its cache (SCHEMA.md): only for a
    model whose outputs depend on nothing but its inputs.
    sequence_batching (True, or a dict with max_sequence_idle_microseconds
    and max_concurrent_sequences) makes a stateful sequence model
    (SCHEMA.md): the model keeps per-sequence state in manypy.request.state.
    load_check (default) then loads the archive in a fresh server Python as
    the server does, warms it up, runs the examples and compares their
    outputs with the eager model's (load_check.py); an archive that fails is
    not written (LoadCheckError, a ValueError, says why). Returns the
    manifest dict.
    """
    if format != "python":
        return _export_compiled(format, model, path, dict(
            name=name, version=version, inputs=inputs, outputs=outputs,
            example_inputs=example_inputs, max_batch_size=max_batch_size, batching=batching,
            instance_count=instance_count, device=device, description=description,
            method=method, more_example_inputs=more_example_inputs, dynamic_dims=dynamic_dims,
            load_check=load_check, response_cache=response_cache),
            dict(intern=intern, extern=extern, modules=modules, streaming=streaming,
                 sequence_batching=sequence_batching))
    _check_not_main(model)
    name = _default_name(name, path)
    results = []
    inputs, outputs, streamed = _resolve_signature(model, inputs, outputs, example_inputs,
                                                   max_batch_size, method, more_example_inputs,
                                                   dynamic_dims, results)
    manifest = _manifest.build_manifest(
        name, version, {"kind": "pickle", "package": PICKLE_PACKAGE, "resource": PICKLE_RESOURCE},
        inputs, outputs, max_batch_size=max_batch_size, batching=batching,
        instance_count=instance_count, device=device, description=description,
        method=method, streaming=_streaming(model, method, streamed, streaming),
        response_cache=response_cache, sequence_batching=sequence_batching)
    _warn_if_not_servable(model)
    module_names = [_module_name(m) for m in (modules or [])]

    def write(exporter):
        exporter.save_text(_manifest.MANIFEST_PACKAGE, _manifest.MANIFEST_RESOURCE,
                           _manifest.dumps(manifest))
        for module_name in module_names:
            exporter.save_module(module_name)
        exporter.save_pickle(PICKLE_PACKAGE, PICKLE_RESOURCE, model)

    check = _load_checker(path, manifest, example_inputs, more_example_inputs, results) \
        if load_check else None
    _write_archive(path, write, intern, extern, check=check)
    return manifest


FORMATS = ("python", "aoti")


def _export_compiled(format, model, path, arguments, python_only):
    """export()/export_factory() for a format other than "python": refuses the
    arguments that only a Python archive has, then hands over to its module
    (manypy.aoti builds on this one, hence the import here)."""
    if format not in FORMATS:
        raise ValueError(f"format: must be one of {FORMATS}, got {format!r}")
    for key, value in python_only.items():
        if value:
            raise ValueError(f"{key}: a {format!r} archive holds compiled code, no Python "
                             f"(leave {key} out, or use format 'python')")
    from . import aoti
    return aoti.export(model, path, **arguments)


def _load_checker(path, manifest, example_inputs, more_example_inputs, results):
    """The check _write_archive runs on the finished archive: load_check.py's,
    with the examples export ran and their eager results."""
    examples = None
    if example_inputs is not None:
        examples = [_as_args(example_inputs)] + [_as_args(e) for e in (more_example_inputs or [])]

    def check(tmp, file_uses):
        from . import load_check
        eager = load_check.eager_outputs(manifest, results) if examples else None
        load_check.check_loads(tmp, examples, eager, manifest=manifest,
                               display_path=os.path.abspath(os.fspath(path)),
                               file_uses=file_uses)

    return check


def export_factory(module_file_or_name, factory="build", weights=None, path=None, *,
                   name=None, version=1, inputs=None, outputs=None,
                   example_inputs=None, max_batch_size=0, batching=None,
                   instance_count=0, device="cpu", description="", intern=None,
                   extern=None, method=None, check_weights=True, more_example_inputs=None,
                   dynamic_dims=None, streaming=None, load_check=True, response_cache=False,
                   sequence_batching=None, format="python"):
    """Writes an archive with entry point kind "factory": the server imports
    the interned module and calls ``factory()`` (no arguments) to build the
    model. module_file_or_name is a path to a .py file or an importable
    module name. weights (a state dict, an nn.Module, or a path to a
    torch.save'd state dict) is stored as manypy/weights.pkl and replaces the
    model's parameters and buffers by name at load time. With check_weights
    (default) or example_inputs the factory is called once here, to check
    that the weights fit the model (load_state_dict, strict) and to run the
    example. Other arguments (load_check included) as in export(). Returns
    the manifest dict.

    format "aoti" calls the factory here, loads the weights into the model
    and compiles it as export(format="aoti") does: the archive holds the
    compiled model, not the factory.
    """
    if path is None:
        raise TypeError("export_factory() needs path, the archive to write")
    _refuse_compile_before_torch2(module_file_or_name)
    module = import_model_module(module_file_or_name)
    module_name = _module_name(module)
    fn = getattr(module, factory, None)
    if not callable(fn):
        raise ValueError(f"factory: module {module_name!r} has no callable {factory!r}")
    state_dict = _load_weights(weights) if weights is not None else None
    if format != "python":
        model = fn()
        if state_dict is not None:
            _load_state_dict(model, state_dict)
        return _export_compiled(format, model, path, dict(
            name=name, version=version, inputs=inputs, outputs=outputs,
            example_inputs=example_inputs, max_batch_size=max_batch_size, batching=batching,
            instance_count=instance_count, device=device, description=description,
            method=method, more_example_inputs=more_example_inputs, dynamic_dims=dynamic_dims,
            load_check=load_check, response_cache=response_cache),
            dict(intern=intern, extern=extern, streaming=streaming,
                 sequence_batching=sequence_batching))
    name = _default_name(name, path)

    model = None
    streamed = False
    results = []
    if example_inputs is not None or (state_dict is not None and check_weights):
        model = fn()
        if state_dict is not None:
            _load_state_dict(model, state_dict)
    if example_inputs is not None:
        _warn_if_not_servable(model)
        inputs, outputs, streamed = _resolve_signature(model, inputs, outputs, example_inputs,
                                                       max_batch_size, method,
                                                       more_example_inputs, dynamic_dims, results)
    elif outputs is None or inputs is None:
        raise ValueError("outputs: inputs and outputs are required unless example_inputs is given")

    entry = {"kind": "factory", "module": module_name, "function": factory}
    if state_dict is not None:
        entry["weights"] = {"package": WEIGHTS_PACKAGE, "resource": WEIGHTS_RESOURCE}
    manifest = _manifest.build_manifest(
        name, version, entry, inputs, outputs, max_batch_size=max_batch_size,
        batching=batching, instance_count=instance_count, device=device,
        description=description, method=method,
        streaming=_streaming(model, method, streamed, streaming),
        response_cache=response_cache, sequence_batching=sequence_batching)

    def write(exporter):
        exporter.save_text(_manifest.MANIFEST_PACKAGE, _manifest.MANIFEST_RESOURCE,
                           _manifest.dumps(manifest))
        exporter.save_module(module_name)
        if state_dict is not None:
            exporter.save_pickle(WEIGHTS_PACKAGE, WEIGHTS_RESOURCE, state_dict)

    check = _load_checker(path, manifest, example_inputs, more_example_inputs, results) \
        if load_check else None
    _write_archive(path, write, intern, extern, required_intern=module_name, check=check)
    return manifest


def import_model_module(module_file_or_name):
    """Imports a model module from a .py file path or by module name and
    returns it. A file in a package (its folder, and those above it, have an
    __init__.py) is imported as that package's module, e.g. models/net.py as
    models.net, with the folder above the package on sys.path, so its
    relative imports (`from .layers import Block`) work; any other file is a
    top-level module named after the file, its folder on sys.path so sibling
    imports work. A module the model imports that is not installed fails
    with what to do about it."""
    if isinstance(module_file_or_name, types.ModuleType):
        return module_file_or_name
    text = os.fspath(module_file_or_name)
    if not (text.endswith(".py") or os.sep in text or os.path.isfile(text)):
        return _import_reporting_missing(text, lambda: importlib.import_module(text))
    file = os.path.abspath(text)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"model file {text!r} does not exist")
    folder, base = os.path.split(file)
    mod_name = os.path.splitext(base)[0]
    if not mod_name.isidentifier():
        raise ValueError(f"model file {text!r}: {mod_name!r} is not a valid module name")
    package = []
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, part = os.path.split(folder)
        if not part.isidentifier():
            raise ValueError(f"model file {text!r}: its package folder {part!r} is not a "
                             f"valid package name")
        package.insert(0, part)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    if package:
        if mod_name == "__init__":
            mod_name = ".".join(package)
        else:
            mod_name = ".".join(package + [mod_name])
        return _import_reporting_missing(text, lambda: importlib.import_module(mod_name))
    existing = sys.modules.get(mod_name)
    if existing is not None and os.path.abspath(getattr(existing, "__file__", "") or "") == file:
        return existing
    spec = importlib.util.spec_from_file_location(mod_name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    try:
        _import_reporting_missing(text, lambda: spec.loader.exec_module(module))
    except BaseException:
        sys.modules.pop(mod_name, None)
        raise
    return module


def _import_reporting_missing(what, run):
    try:
        return run()
    except ModuleNotFoundError as e:
        if e.name is None or what.endswith(e.name.replace(".", os.sep) + ".py") or what == e.name:
            raise
        raise ModuleNotFoundError(
            f"importing {what} failed: {e}. Install {e.name} here (the server's Python needs it "
            f"too, as an extern module), or import it inside try/except ImportError if the model "
            f"can run without it", name=e.name) from e


def _default_name(name, path):
    if name is None:
        name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return name


def _module_name(module):
    name = module if isinstance(module, str) else getattr(module, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"modules: expected a module or a module name, got {module!r}")
    if name == "__main__":
        raise ValueError(_MAIN_MESSAGE.format(what="a module to package is __main__"))
    return name


_MAIN_MESSAGE = (
    "{what}: torch.package cannot intern __main__ (a script run directly). "
    "Put the model class and its helpers in a module (e.g. net.py), import it "
    "from your script (`from net import Net`) and export again.")


def _check_not_main(model):
    objs = list(model.modules()) if isinstance(model, torch.nn.Module) else [model]
    for obj in objs:
        cls = type(obj)
        if cls.__module__ == "__main__":
            raise ValueError(_MAIN_MESSAGE.format(what=f"class {cls.__qualname__} is defined in __main__"))
    if callable(model) and getattr(model, "__module__", None) == "__main__" \
            and not isinstance(model, torch.nn.Module):
        raise ValueError(_MAIN_MESSAGE.format(what="the model is defined in __main__"))


def _warn_if_not_servable(model):
    if isinstance(model, torch.nn.Module):
        train_dependent = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._NormBase,
                           torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer,
                           torch.nn.TransformerDecoderLayer, torch.nn.RNNBase)
        if any(m.training and isinstance(m, train_dependent) for m in model.modules()):
            warnings.warn("the model is in training mode (dropout, batch-norm updates); "
                          "call model.eval() before exporting", stacklevel=3)
        devices = {t.device.type for t in list(model.parameters()) + list(model.buffers())}
        if devices - {"cpu"}:
            warnings.warn(f"the model has tensors on {sorted(devices)}; archives are "
                          "portable when saved from CPU (the manifest's device says where "
                          "the server runs it)", stacklevel=3)


def _site_folders():
    """The folders this Python installs packages into, resolved."""
    folders = []
    try:
        folders += site.getsitepackages()
    except AttributeError:  # some virtualenv versions lack it
        pass
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        folders.append(user)
    folders += [p for p in sys.path
                if p and os.path.basename(os.path.normpath(p)) in SITE_FOLDER_NAMES]
    seen = []
    for folder in folders:
        real = os.path.realpath(folder)
        if os.path.isdir(real) and real not in seen:
            seen.append(real)
    return seen


def _is_under(path, folders):
    real = os.path.realpath(path)
    return any(real == f or real.startswith(f + os.sep) for f in folders)


def installed_modules():
    """Sorted top-level module names installed in this Python's site-packages
    / dist-packages folders: what export() externs by default. A name counts
    only where it resolves to those folders (a user module of the same name
    earlier on sys.path shadows it, and stays interned)."""
    folders = _site_folders()
    candidates = set()
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            stem = entry.split(".", 1)[0]
            if entry.endswith((".dist-info", ".egg-info", ".pth")) or not stem.isidentifier() \
                    or stem == "__pycache__":
                continue
            if entry.endswith(".py") or entry.endswith(".so") or (
                    "." not in entry and os.path.isdir(os.path.join(folder, entry))):
                candidates.add(stem)
    names = []
    for name in sorted(candidates):
        module = sys.modules.get(name)
        if module is not None:
            locations = [getattr(module, "__file__", None) or ""] + list(getattr(module, "__path__", []))
        else:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                continue
            if spec is None:
                continue
            locations = [spec.origin or ""] + list(spec.submodule_search_locations or [])
        if any(loc and _is_under(loc, folders) for loc in locations):
            names.append(name)
    return names


def _write_archive(path, write, intern, extern, required_intern=None, check=None):
    """Runs write(exporter) into a temporary file and moves it to path, so an
    interrupted export, or one whose archive fails `check`, never leaves an
    archive behind. The temporary file has the same base name (torch.package
    names the archive's top-level folder after it). Records the extern modules
    that only guarded imports need (manypy/optional_modules). check(tmp_path,
    file_uses), if given, runs on the finished archive before it is moved to
    path; file_uses lists where the archive's code uses __file__."""
    path = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    tmpdir = tempfile.mkdtemp(prefix=".manypy-export-", dir=folder)
    tmp = os.path.join(tmpdir, os.path.basename(path))
    try:
        try:
            with PackageExporter(tmp) as exporter:
                # torch.package applies the first pattern that matches, so
                # explicit extern and intern patterns win over the installed
                # modules (a user can still intern an installed package).
                exporter.mock(list(SERVER_API_MODULES))
                exporter.extern(list(DEFAULT_EXTERN) + list(extern or []))
                if required_intern is not None:
                    exporter.intern(required_intern)
                if intern:
                    exporter.intern(list(intern))
                installed = [p for name in installed_modules() for p in (name, name + ".**")]
                if installed:
                    exporter.extern(installed)
                if not intern:
                    exporter.intern(list(DEFAULT_INTERN))
                write(exporter)
                graph = exporter.dependency_graph
                optional = _source_scan.optional_externs(graph, _extern_nodes(graph))
                if optional:
                    exporter.save_text(OPTIONAL_MODULES_PACKAGE, OPTIONAL_MODULES_RESOURCE,
                                       "".join(f"{m}\n" for m in optional))
                file_uses = _source_scan.file_uses(graph)
                if _source_scan.compiles(graph):
                    exporter.save_text(USES_COMPILE_PACKAGE, USES_COMPILE_RESOURCE, "")
        except PackagingError as e:
            text = str(e)
            if "__main__" in text:
                raise ValueError(_MAIN_MESSAGE.format(what="the model refers to __main__")
                                 + "\n" + text) from e
            raise ValueError(
                "packaging failed (a module could not be interned; pass extern=[...] "
                "for modules the server's Python provides, e.g. C extensions):\n" + text) from e
        if check is not None:
            check(tmp, file_uses)
        elif file_uses:
            warnings.warn(_FILE_USE_WARNING.format(
                where=", ".join(f"{f}:{n}" for f, n in file_uses[:3])), stacklevel=4)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _extern_nodes(graph):
    return [name for name in graph.nodes
            if graph.nodes[name].get("action") == _ModuleProviderAction.EXTERN]


_FILE_USE_WARNING = (
    "the archive's code uses __file__ ({where}) and the load check did not run: an archived "
    "module has no folder on disk, so files found next to it are not there when the server "
    "loads it (read them while building the model, before packaging)")


def _load_weights(weights):
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


def _refuse_compile_before_torch2(module_file_or_name):
    """A model module that calls torch.compile cannot be packaged (nor served)
    with PyTorch 1.x, which has no torch.compile: say so, naming the version."""
    if hasattr(torch, "compile"):
        return
    if isinstance(module_file_or_name, types.ModuleType):
        path = getattr(module_file_or_name, "__file__", None) or ""
    else:
        path = os.fspath(module_file_or_name)
        if not path.endswith(".py"):
            try:
                spec = importlib.util.find_spec(path)
            except (ImportError, ValueError):
                spec = None
            path = spec.origin if spec is not None and spec.origin else ""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError:
        return
    if _source_scan.uses_torch_compile(source):
        raise ValueError(
            f"{module_file_or_name}: the model calls torch.compile, which PyTorch "
            f"{torch.__version__} does not have: compiled models need PyTorch 2.x "
            f"(Debian 13's python3-torch 2.6); package and serve it there")


def _compiled_original(model):
    """The module a torch.compile'd model (OptimizedModule) wraps, which owns
    the parameters under their own names; else the model."""
    original = getattr(model, "_orig_mod", None)
    return original if isinstance(original, torch.nn.Module) else model


def _load_state_dict(model, state_dict):
    if not isinstance(model, torch.nn.Module):
        raise ValueError("weights: the factory must return a torch.nn.Module to take weights")
    try:
        _compiled_original(model).load_state_dict(state_dict, strict=True)
    except RuntimeError as e:
        raise ValueError(f"weights: do not fit the model built by the factory: {e}") from e


# ---------------------------------------------------------------------------
# Signatures from an example run


def _is_bytes_leaf(x):
    return isinstance(x, (bytes, bytearray, str))


def _nested_bytes_shape(value):
    """The shape of a (nested) list of bytes/str, or None if it is not one."""
    if _is_bytes_leaf(value):
        return []
    if not isinstance(value, list):
        return None
    if not value:
        return [0]
    shapes = [_nested_bytes_shape(v) for v in value]
    if any(s is None for s in shapes) or any(s != shapes[0] for s in shapes):
        return None
    return [len(value)] + shapes[0]


def _value_spec(value, field):
    """(datatype, shape) of one input or output value."""
    if isinstance(value, torch.Tensor):
        return datatype_of(value.dtype), list(value.shape)
    shape = _nested_bytes_shape(value)
    if shape is None:
        raise ValueError(f"{field}: expected a torch.Tensor or a (nested, rectangular) list "
                         f"of bytes/str, got {type(value).__name__}")
    return "BYTES", shape


def _shape_matches(declared, actual):
    return len(declared) == len(actual) and all(d == -1 or d == a for d, a in zip(declared, actual))


def _strip_batch(shape, max_batch_size, batch, field):
    if max_batch_size <= 0:
        return shape
    if not shape:
        raise ValueError(f"{field}: has no batch dimension but max_batch_size is {max_batch_size}")
    if batch is not None and shape[0] != batch:
        raise ValueError(f"{field}: batch dimension is {shape[0]}, the example batch is {batch}")
    if shape[0] > max_batch_size:
        raise ValueError(f"{field}: batch dimension {shape[0]} exceeds max_batch_size {max_batch_size}")
    return shape[1:]


_INDEX_SUFFIX = re.compile(r"__([0-9]+)$")


def output_index(name):
    """The position a tuple/list output named NAME__<index> takes from the
    model's result (Triton's PyTorch-backend naming convention), or None."""
    m = _INDEX_SUFFIX.search(name)
    return int(m.group(1)) if m else None


def _split_outputs(result, declared):
    """[(name or None, value)] from what the model returned: a dict's items,
    a tuple's or list's elements, or the result itself. A list or tuple
    holding exactly one dict (torchvision's detectors, one image per call) is
    that dict. Values may be None (left out of the signature)."""
    if isinstance(result, (tuple, list)) and len(result) == 1 and isinstance(result[0], dict):
        result = result[0]
    if isinstance(result, dict):
        return [(k, v) for k, v in result.items()]
    if isinstance(result, tuple):
        return [(None, v) for v in result]
    if isinstance(result, list):
        single_bytes = _nested_bytes_shape(result) is not None
        if declared is not None:
            single_bytes = single_bytes and len(declared) == 1 and declared[0]["datatype"] == "BYTES"
        if not single_bytes:
            return [(None, v) for v in result]
    return [(None, result)]


def _as_args(example_inputs):
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    return (example_inputs,)


def _check_declared(field, spec, datatype, shape, datatype_source, shape_source):
    """Raises ValueError naming `field` when a declared tensor spec disagrees
    with what an example run produced."""
    if spec["datatype"] != datatype:
        raise ValueError(f"{field}.datatype: declared {spec['datatype']}, "
                         f"{datatype_source} {datatype}")
    if not _shape_matches(spec["shape"], shape):
        raise ValueError(f"{field}.shape: declared {spec['shape']}, {shape_source} "
                         f"{shape} (batch dimension excluded)")


def _merge_shapes(shapes, field):
    """One shape for several examples' shapes: dimensions that differ, or
    that are 0 in some example (the schema has no 0), become -1."""
    if any(len(s) != len(shapes[0]) for s in shapes):
        raise ValueError(f"{field}: the examples give different ranks {shapes}")
    return [d if d != 0 and all(s[j] == d for s in shapes) else -1
            for j, d in enumerate(shapes[0])]


def _run_example(call, args, max_batch_size, outputs, where):
    """Runs one example: (input specs [(datatype, shape)], the result, and
    [(key, datatype, shape)] per output element; datatype and shape are None
    for an element that is None)."""
    batch = None
    arg_specs = []
    for i, value in enumerate(args):
        datatype, shape = _value_spec(value, f"{where}[{i}]")
        if max_batch_size > 0 and shape:
            batch = shape[0] if batch is None else batch
        arg_specs.append((datatype, _strip_batch(shape, max_batch_size, batch, f"{where}[{i}]")))
    with torch.inference_mode():
        result = call(*args)
        responses = _first_responses(result, where) if _is_stream(result) else [result]
    if result is None:
        raise ValueError(f"outputs: the model returned None for {where}; there is nothing to serve")
    # A stream's responses share one signature: dimensions that differ
    # between them (a text piece's length) become -1.
    per_response = []
    for n, response in enumerate(responses):
        found = []
        at = where if len(responses) == 1 else f"{where}, response {n}"
        for i, (key, value) in enumerate(_split_outputs(response, outputs)):
            if value is None:
                found.append((key, None, None))
                continue
            field = f"output {key!r}" if key is not None else f"output {i}"
            datatype, shape = _value_spec(value, f"{field} ({at})")
            found.append((key, datatype, _strip_batch(shape, max_batch_size, batch, field)))
        per_response.append(found)
    return arg_specs, responses[0], _merge_responses(per_response, where), _is_stream(result)


# How many responses of a streaming model's example are read for its signature.
_EXAMPLE_RESPONSES = 16


def _is_stream(result):
    """Whether a model's result is a stream of responses (a generator or
    another iterator; a tensor is iterable but not an iterator)."""
    return isinstance(result, collections.abc.Iterator) and not isinstance(result, torch.Tensor)


def _first_responses(stream, where):
    """Up to _EXAMPLE_RESPONSES values the stream yields (then closes it)."""
    try:
        responses = list(itertools.islice(stream, _EXAMPLE_RESPONSES))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    if not responses:
        raise ValueError(f"outputs: the streaming model yielded nothing for {where}; there is "
                         f"nothing to serve")
    return responses


def _merge_responses(per_response, where):
    """One [(key, datatype, shape)] for all of a stream's responses."""
    first = per_response[0]
    merged = []
    for i, (key, datatype, shape) in enumerate(first):
        values = [r[i] for r in per_response if i < len(r)]
        if len(values) != len(per_response) or any(v[0] != key for v in values):
            raise ValueError(f"outputs: the streaming model's responses for {where} hold "
                             f"different outputs ({[[k for k, _, _ in r] for r in per_response]})")
        if any(v[1] is None for v in values):
            merged.append((key, None, None))
            continue
        datatypes = {v[1] for v in values}
        field = f"output {key!r}" if key is not None else f"output {i}"
        if len(datatypes) > 1:
            raise ValueError(f"{field}: the responses for {where} give datatypes {sorted(datatypes)}")
        merged.append((key, datatype, _merge_shapes([v[2] for v in values], field)))
    return merged


def _streaming(model, method, streamed, streaming):
    """The manifest's `streaming`: as given, else whether the examples
    streamed or the method is a generator function."""
    if streaming is not None:
        return bool(streaming)
    if streamed:
        return True
    if model is None:
        return False
    call = getattr(model, method or "forward", None)
    return inspect.isgeneratorfunction(call)


def _apply_dynamic_dims(dynamic_dims, inputs, outputs):
    """Marks the named tensors' dimensions -1 (variable). dynamic_dims maps a
    tensor name to dimension indices, batch dimension excluded."""
    specs = {s["name"]: s for s in list(inputs) + list(outputs)}
    for name, dims in dynamic_dims.items():
        spec = specs.get(name)
        if spec is None:
            raise ValueError(f"dynamic_dims: no input or output named {name!r} (inputs "
                             f"{[s['name'] for s in inputs]}, outputs {[s['name'] for s in outputs]})")
        for d in ([dims] if isinstance(dims, int) else list(dims)):
            if not isinstance(d, int) or not 0 <= d < len(spec["shape"]):
                raise ValueError(f"dynamic_dims[{name!r}]: dimension {d!r} is not in 0.."
                                 f"{len(spec['shape']) - 1} (its shape is {spec['shape']}, "
                                 f"batch dimension excluded)")
            spec["shape"][d] = -1


def _resolve_signature(model, inputs, outputs, example_inputs, max_batch_size, method,
                       more_example_inputs=None, dynamic_dims=None, results=None):
    """Returns (inputs, outputs, streamed) as normalized spec lists (and
    whether the model streamed its responses for the examples), running the
    examples (if any) to infer or check them: dimensions that differ between
    examples become -1, as do those dynamic_dims names; outputs that are None
    for an example are left out (with a warning). Each example's result is
    appended to the list `results`, when given."""
    if inputs is not None:
        inputs = _manifest.tensor_specs(inputs, "inputs")
    if outputs is not None:
        outputs = _manifest.tensor_specs(outputs, "outputs")
    if example_inputs is None:
        if more_example_inputs:
            raise ValueError("more_example_inputs: needs example_inputs too")
        if inputs is None:
            raise ValueError("inputs: required unless example_inputs is given")
        if outputs is None:
            raise ValueError("outputs: required unless example_inputs is given "
                             "(then they are inferred from one run)")
        if dynamic_dims:
            _apply_dynamic_dims(dynamic_dims, inputs, outputs)
        return inputs, outputs, False

    call = getattr(model, method) if method else model
    examples = [_as_args(example_inputs)] + [_as_args(e) for e in (more_example_inputs or [])]
    runs = []
    for n, args in enumerate(examples):
        where = "example_inputs" if n == 0 else f"more_example_inputs[{n - 1}]"
        if len(args) != len(examples[0]):
            raise ValueError(f"{where}: {len(args)} arguments, example_inputs has {len(examples[0])}")
        if inputs is not None:
            if len(inputs) != len(args):
                raise ValueError(f"inputs: {len(inputs)} declared but {where} has {len(args)}")
        runs.append(_run_example(call, args, max_batch_size, outputs, where))
        if results is not None:
            results.append(runs[-1][1])

    # Inputs: one spec per position, shapes merged over the examples.
    arg_specs = []
    for i in range(len(examples[0])):
        datatypes = {run[0][i][0] for run in runs}
        if len(datatypes) > 1:
            raise ValueError(f"inputs[{i}]: the examples give datatypes {sorted(datatypes)}")
        arg_specs.append((datatypes.pop(), _merge_shapes([run[0][i][1] for run in runs], f"inputs[{i}]")))
    if inputs is None:
        inputs = [{"name": f"INPUT__{i}", "datatype": d, "shape": s} for i, (d, s) in enumerate(arg_specs)]
    else:
        for run in runs:
            for i, (spec, (datatype, shape)) in enumerate(zip(inputs, run[0])):
                _check_declared(f"inputs[{i}]", spec, datatype, shape,
                                "example input is", "example input has")

    # Outputs: the same elements in every example; None in any example = left out.
    is_dict = isinstance(runs[0][1], dict) or (
        isinstance(runs[0][1], (tuple, list)) and len(runs[0][1]) == 1 and isinstance(runs[0][1][0], dict))
    keys = [k for k, _, _ in runs[0][2]]
    for run in runs[1:]:
        if [k for k, _, _ in run[2]] != keys:
            raise ValueError(f"outputs: the examples return different outputs "
                             f"({len(keys)} vs {len(run[2])}: {keys} vs {[k for k, _, _ in run[2]]})")
    merged = []  # (position, key, datatype or None, shape or None)
    for i, key in enumerate(keys):
        field = f"output {key!r}" if key is not None else f"output {i}"
        values = [run[2][i] for run in runs]
        if any(d is None for _, d, _ in values):
            merged.append((i, key, None, None))
            continue
        datatypes = {d for _, d, _ in values}
        if len(datatypes) > 1:
            raise ValueError(f"{field}: the examples give datatypes {sorted(datatypes)}")
        merged.append((i, key, datatypes.pop(), _merge_shapes([s for _, _, s in values], field)))
    if all(d is None for _, _, d, _ in merged):
        raise ValueError("outputs: every output the model returned is None for the examples; "
                         "there is nothing to serve")

    def name_of(i, key):
        return key if key is not None else f"OUTPUT__{i}"

    if outputs is None:
        dropped = [name_of(i, k) for i, k, d, _ in merged if d is None]
        specs = [{"name": name_of(i, k), "datatype": d, "shape": s} for i, k, d, s in merged if d is not None]
        if dropped:
            _warn_none_outputs(dropped, [s["name"] for s in specs])
        outputs = _manifest.tensor_specs(specs, "outputs")
    else:
        for run in runs:
            _check_declared_outputs(outputs, run[2], is_dict)
    if dynamic_dims:
        _apply_dynamic_dims(dynamic_dims, inputs, outputs)
    return inputs, outputs, any(run[3] for run in runs)


def _warn_none_outputs(dropped, kept):
    warnings.warn(f"output(s) {dropped} are None for the example inputs: left out of the "
                  f"signature; the server serves {kept} (a None in a served output at serving "
                  f"time is a model error)", stacklevel=4)


def _check_declared_outputs(outputs, found, is_dict):
    """Checks one example's outputs against the declared ones (by key for a
    dict; by position, or by NAME__<index>, for a tuple or list)."""
    none_hint = ("leave it out of outputs (an output that is None for the examples is not "
                 "served)")
    if is_dict:
        got = {k for k, d, _ in found if d is not None}
        nones = {k for k, d, _ in found if d is None}
        want = {o["name"] for o in outputs}
        for i, o in enumerate(outputs):
            if o["name"] in nones:
                raise ValueError(f"outputs[{i}]: {o['name']!r} is None for the example inputs; {none_hint}")
        if got != want:
            raise ValueError(f"outputs: declared {sorted(want)}, the model returned keys {sorted(got)}")
        by_name = {k: (d, s) for k, d, s in found}
        pairs = [(i, o, by_name[o["name"]]) for i, o in enumerate(outputs)]
        if nones:
            _warn_none_outputs(sorted(nones), sorted(want))
    else:
        if len(found) == len(outputs):
            positions = list(range(len(outputs)))
        else:
            positions = [output_index(o["name"]) for o in outputs]
            if any(p is None or p >= len(found) for p in positions):
                nones = [i for i, (_, d, _) in enumerate(found) if d is None]
                hint = (f"; elements {nones} are None: name the others NAME__<index> (their "
                        f"position in the result), e.g. OUTPUT__0") if nones else ""
                raise ValueError(f"outputs: {len(outputs)} declared, the model returned "
                                 f"{len(found)}{hint}")
            left_out = [i for i in range(len(found)) if i not in positions]
            if left_out:
                _warn_none_outputs([f"element {i}" for i in left_out], [o["name"] for o in outputs])
        pairs = []
        for i, (o, p) in enumerate(zip(outputs, positions)):
            _, d, s = found[p]
            if d is None:
                raise ValueError(f"outputs[{i}]: {o['name']!r} (element {p} of the result) is None "
                                 f"for the example inputs; {none_hint}")
            pairs.append((i, o, (d, s)))
    for i, spec, (datatype, shape) in pairs:
        _check_declared(f"outputs[{i}]", spec, datatype, shape,
                        "the model returned", "the model returned")


def example_inputs_for(inputs, max_batch_size=0, batch_size=1, seed=0):
    """Synthetic positional inputs for a signature: random floats, zeros for
    integers and BOOL, b"example" for BYTES; -1 dimensions become 1 and a
    batch dimension of batch_size leads when max_batch_size > 0."""
    gen = torch.Generator().manual_seed(seed)
    args = []
    for i, spec in enumerate(_manifest.tensor_specs(inputs, "inputs")):
        shape = [1 if d == -1 else d for d in spec["shape"]]
        if max_batch_size > 0:
            shape = [batch_size] + shape
        if spec["datatype"] == "BYTES":
            value = b"example"
            for d in reversed(shape):
                value = [value for _ in range(d)]
            args.append(value)
            continue
        dtype = _DATATYPE_TO_DTYPE.get(spec["datatype"])
        if dtype is None:
            raise ValueError(f"inputs[{i}].datatype: {spec['datatype']} has no torch dtype here")
        if dtype.is_floating_point:
            args.append(torch.randn(shape, generator=gen).to(dtype))
        else:
            args.append(torch.zeros(shape, dtype=dtype))
    return tuple(args)


# ---------------------------------------------------------------------------
# Reading archives


# The archive's one top-level folder: server_runtime's rule (the load check's
# child reads archives with it too).
_top_folder = _server_runtime._top_folder


def archive_entries(path):
    """[(name relative to the top folder, ZipInfo)] in archive order."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    top = _top_folder([i.filename for i in infos], path)
    return [(i.filename[len(top) + 1:], i) for i in infos]


def read_manifest(path, validate=True):
    """The manifest dict of an archive (validated unless validate=False)."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        top = _top_folder(names, path)
        entry = f"{top}/{_manifest.MANIFEST_PACKAGE}/{_manifest.MANIFEST_RESOURCE}"
        if entry not in names:
            raise ValueError(f"{path}: no {_manifest.MANIFEST_PACKAGE}/{_manifest.MANIFEST_RESOURCE}")
        data = zf.read(entry)
    if not validate:
        return json.loads(data)
    try:
        return _manifest.loads(data)
    except ValueError as e:
        raise ValueError(f"{path}: manifest {e}") from None


def data_offset(path, info):
    """Byte offset of an entry's data in the file (after its local header)."""
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise ValueError(f"{path}: bad local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def check_archive(path):
    """Python-side structural checks (a subset of the C++ checker's): one
    top-level folder, no path tricks, a valid manifest, the entry point's
    files present, every .data/*.storage entry stored and 64-byte aligned.
    Returns the manifest; raises ValueError naming the problem."""
    entries = archive_entries(path)
    for rel, info in entries:
        name = info.filename
        if name.startswith("/") or "\\" in name or "\0" in name or ".." in name.split("/"):
            raise ValueError(f"{path}: unsafe entry name {name!r}")
    manifest = read_manifest(path)
    names = {rel for rel, _ in entries}
    for rel, info in entries:
        if rel.startswith(".data/") and rel.endswith(".storage"):
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"{path}: {rel} is compressed; storages must be stored")
            if data_offset(path, info) % STORAGE_ALIGNMENT:
                raise ValueError(f"{path}: {rel} is not {STORAGE_ALIGNMENT}-byte aligned")
    ep = manifest["entry_point"]
    needed = []
    if ep["kind"] in ("pickle", "torchscript", "aoti"):
        default = {"pickle": PICKLE_RESOURCE, "torchscript": _manifest.TORCHSCRIPT_RESOURCE,
                   "aoti": _manifest.AOTI_RESOURCE}[ep["kind"]]
        needed.append(f"{ep.get('package', PICKLE_PACKAGE).replace('.', '/')}/"
                      f"{ep.get('resource', default)}")
    else:
        mod = ep["module"].replace(".", "/")
        if f"{mod}.py" not in names and f"{mod}/__init__.py" not in names:
            raise ValueError(f"{path}: entry_point.module {ep['module']!r} is not in the archive")
        if "weights" in ep:
            needed.append(f"{ep['weights']['package'].replace('.', '/')}/{ep['weights']['resource']}")
    for rel in needed:
        if rel not in names:
            raise ValueError(f"{path}: entry point resource {rel} is missing")
    return manifest


def load_torchscript(path, manifest):
    """The TorchScript module a torchscript-platform archive holds (what the
    server's C++ loads with torch::jit::load). Here rather than in
    manypy.torchscript, which builds on this module, so that the two never
    import each other."""
    ep = manifest["entry_point"]
    data = PackageImporter(os.fspath(path)).load_binary(
        ep.get("package", _manifest.TORCHSCRIPT_PACKAGE), ep.get("resource", _manifest.TORCHSCRIPT_RESOURCE))
    return torch.jit.load(io.BytesIO(data))


def load_model(path, device="cpu"):
    """Loads an archive the way the server does, in this interpreter:
    returns (model, manifest). After check_archive, a Python archive goes
    through the server's own loader (server/lifecycle/model_runtime.py, via
    server_runtime.py): its extern modules imported first, the entry point
    built over storages mapped from the file, eval mode, no gradients, on
    `device`. A reference for tests and users; load_check.py does the same in
    a fresh process."""
    manifest = check_archive(path)
    if manifest["platform"] == _manifest.TORCHSCRIPT_PLATFORM:
        return load_torchscript(path, manifest), manifest
    if manifest["platform"] == _manifest.AOTI_PLATFORM:
        from . import aoti  # builds on this module
        return aoti.Loaded(path, manifest), manifest
    model, _ = _server_runtime.load(os.fspath(path), device=device)
    return model, manifest
