"""The model and the module it comes from, before anything is packaged: a
model file or module imported as the server will find it, a model or module
defined in __main__ refused (torch.package cannot intern it), a model in
training mode or off the CPU warned about, and torch.compile refused on
PyTorch 1.x."""

import importlib
import importlib.util
import os
import sys
import types
import warnings

import torch

from . import source_scan as _source_scan


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


def default_name(name, path):
    if name is None:
        name = os.path.splitext(os.path.basename(os.fspath(path)))[0]
    return name


def module_name(module):
    name = module if isinstance(module, str) else getattr(module, "__name__", None)
    if not isinstance(name, str):
        raise TypeError(f"modules: expected a module or a module name, got {module!r}")
    if name == "__main__":
        raise ValueError(MAIN_MESSAGE.format(what="a module to package is __main__"))
    return name


MAIN_MESSAGE = (
    "{what}: torch.package cannot intern __main__ (a script run directly). "
    "Put the model class and its helpers in a module (e.g. net.py), import it "
    "from your script (`from net import Net`) and export again.")


def check_not_main(model):
    objs = list(model.modules()) if isinstance(model, torch.nn.Module) else [model]
    for obj in objs:
        cls = type(obj)
        if cls.__module__ == "__main__":
            raise ValueError(MAIN_MESSAGE.format(what=f"class {cls.__qualname__} is defined in __main__"))
    if callable(model) and getattr(model, "__module__", None) == "__main__" \
            and not isinstance(model, torch.nn.Module):
        raise ValueError(MAIN_MESSAGE.format(what="the model is defined in __main__"))


def warn_if_not_servable(model):
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



def refuse_compile_before_torch2(module_file_or_name):
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
