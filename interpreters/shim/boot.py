# Runs first in every manypy interpreter, before `site`: routes every
# extension-module import to this interpreter's private copy of the module
# (prepared by the host on first import), so each interpreter has its own
# CPython runtime and module state while all share one libtorch; imports some
# modules lazily; and applies torch_patches.py to torch's modules as they load.
# Runs once, in the interpreter's owner thread; its finder, in importing threads.
import importlib.machinery
import importlib.util
import sys
import types

import _manypy


class _CopiedExtensionLoader(importlib.machinery.ExtensionFileLoader):
    """Loads the private copy but reports the original file as __file__, so
    code that finds data next to its extension module keeps working."""

    def __init__(self, name, copy, original):
        super().__init__(name, copy)
        self.original = original

    def exec_module(self, module):
        super().exec_module(module)
        module.__file__ = self.original


class _LazyModule(types.ModuleType):
    """A module in _manypy.lazy_modules whose code has not run yet.

    It has what the import system set before running a module (__name__,
    __spec__, __path__, __file__, ...). Reading any other attribute runs the
    module's code in this very module object (so every reference taken
    earlier, e.g. torch's `from torch import onnx`, sees the real module), then
    the class becomes ModuleType again. Importing a submodule runs it first
    (ManypyExtensionFinder). Python 3.11's importlib.util.LazyLoader cannot
    be used: a second `import torch.onnx` reads __spec__ through
    __getattribute__, which would run the module at once."""

    def __getattr__(self, attr):
        if attr == "__path__":
            # Not a package (a package's __path__ is set before its code
            # runs): `from module import name` asks, and must not run it.
            raise AttributeError(f"module {self.__name__!r} has no attribute '__path__'")
        name = f"{self.__name__}.{attr}"
        if name in _lazy_function_names or name in _lazy_value_names:
            stand_in = (_lazy_function if name in _lazy_function_names else _LazyValue)(
                self.__name__, attr)
            setattr(self, attr, stand_in)  # the module's code, once run, puts the real one here
            return stand_in
        _run_lazy_module(self)
        if type(self) is _LazyModule:  # this thread is running the module's code
            raise AttributeError(f"partially initialized module {self.__name__!r} has no "
                                 f"attribute {attr!r}")
        return getattr(self, attr)


def _lazy_function(module_name, name):
    """The stand-in `from module_name import name` gets while the module has
    not run (PoolOptions::lazy_functions): its first call runs the module's
    lazy packages from the top, then the module, and calls the real function."""
    real = None

    def call(*args, **kwargs):
        nonlocal real
        if real is None:
            real = _real_object(module_name, name)
        return real(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module_name
    call.__doc__ = f"manypy's stand-in for {module_name}.{name}: runs {module_name} at its first call"
    return call


def _real_object(module_name, name):
    """`module_name`.`name` once the module has run (with its lazy parents,
    from the top)."""
    module = sys.modules.get(module_name)
    if type(module) is _LazyModule:
        _run_lazy_module(module)
    return getattr(importlib.import_module(module_name), name)


class _LazyValue:
    """The stand-in `from module import name` gets for an object other than a
    function (PoolOptions::lazy_values) while its module has not run: its
    first use (an attribute, an item, `in`, iteration, len, a call) runs the
    module's lazy packages from the top, then the module, and every use is
    the real object's."""

    def __init__(self, module_name, name):
        self._manypy_where = (module_name, name)
        self._manypy_real = None

    def _manypy_resolve(self):
        if self._manypy_real is None:
            self._manypy_real = _real_object(*self._manypy_where)
        return self._manypy_real

    def __getattr__(self, attr):
        return getattr(self._manypy_resolve(), attr)

    def __getitem__(self, key):
        return self._manypy_resolve()[key]

    def __contains__(self, item):
        return item in self._manypy_resolve()

    def __iter__(self):
        return iter(self._manypy_resolve())

    def __len__(self):
        return len(self._manypy_resolve())

    def __call__(self, *args, **kwargs):
        return self._manypy_resolve()(*args, **kwargs)

    def __repr__(self):
        return repr(self._manypy_resolve())


# name -> the loader that runs the module's code, while it has not run.
_lazy_loaders = {}

# Imported lazily here: PoolOptions::lazy_modules and, on PyTorch 1.x in every
# interpreter but the one that makes the process-global registrations (and
# only when lazy imports are on), torch._meta_registrations: there its
# torch.library registrations are no-ops (torch_patches.py), so
# running it at `import torch` would only build Python objects that eager
# execution does not use. Not on 2.x: each interpreter's meta kernels are
# its own there (FakeTensorMode, torch.compile), and torch.func's first call
# imports torch._prims, whose import cycle needs it run (issue: vmap failed in
# interpreter 1 with "cannot import name 'ContentStoreReader'").
_lazy_names = frozenset(_manypy.lazy_modules) | (
    {"torch._meta_registrations"}
    if (_manypy.lazy_modules and not _manypy.owns_registrations and
        not _manypy.routes_python_kernels) else set())

# PoolOptions::lazy_functions and lazy_values, and the modules that hold them
# with their parent packages below the top one (which `import torch` ran
# already): lazy too, so that importing the function's module runs none of
# them.
_lazy_function_names = frozenset(_manypy.lazy_functions)
_lazy_value_names = frozenset(_manypy.lazy_values)
_lazy_names |= {
    ".".join(parts[:end])
    for parts in (f.split(".")[:-1] for f in _lazy_function_names | _lazy_value_names)
    for end in range(2, len(parts) + 1)}


def _run_lazy_module(module):
    name = module.__name__
    # Its lazy parent packages first, from the top, as an import runs them: a
    # package's __init__ may import its submodules in an order their imports
    # of each other rely on (`from torch._dynamo.utils import counters` ran
    # utils before torch._dynamo and failed on a circular import).
    parts = name.split(".")
    for end in range(1, len(parts)):
        parent = sys.modules.get(".".join(parts[:end]))
        if type(parent) is _LazyModule:
            _run_lazy_module(parent)
    # The import system's own per-module lock: another thread importing the
    # module meanwhile waits for it (and its deadlock detection applies).
    with importlib._bootstrap._ModuleLockManager(name):
        loader = _lazy_loaders.pop(name, None)
        if loader is None or type(module) is not _LazyModule:
            return
        spec = module.__spec__
        spec.loader = loader
        module.__loader__ = loader
        spec._initializing = True
        try:
            loader.exec_module(module)
        except BaseException:
            if sys.modules.get(name) is module:
                del sys.modules[name]  # as a failed import does
            raise
        finally:
            spec._initializing = False
            module.__class__ = types.ModuleType


class _LazyLoader:
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        _lazy_loaders[module.__name__] = self.loader
        module.__class__ = _LazyModule


class _AlreadyImported:
    """Loader of a module that a lazy parent's code imported meanwhile."""

    def __init__(self, module):
        self.module = module
        self.spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec  # the import system set ours


# An extension module loaded by path (importlib.util.spec_from_file_location:
# Inductor's compiled kernels, torch.utils.cpp_extension's builds) rather
# than found by ManypyExtensionFinder runs from this interpreter's private
# copy too: a Debian-style extension does not link libpython, so its Python
# API symbols resolve only against the libpython the copy names (Inductor's
# kernels failed with "undefined symbol: PyTuple_Type"). __file__ stays the
# original (module_from_spec sets it from the spec it was given).
_create_extension_module = importlib.machinery.ExtensionFileLoader.create_module


def _create_private_extension_module(self, spec):
    if not isinstance(self, _CopiedExtensionLoader) and spec.origin:
        copy = _manypy.prepare_extension(spec.name, spec.origin)
        if copy != spec.origin:
            spec = importlib.machinery.ModuleSpec(spec.name, self, origin=copy)
    return _create_extension_module(self, spec)


importlib.machinery.ExtensionFileLoader.create_module = _create_private_extension_module



class ManypyExtensionFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        parent = name.rpartition(".")[0]
        if (parent and type(sys.modules.get(parent)) is _LazyModule and
                name not in _lazy_names):  # a lazy module's lazy submodule leaves it be
            _run_lazy_module(sys.modules[parent])
            imported = sys.modules.get(name)
            if imported is not None:
                # The parent's code imported `name`. The import system, which
                # asked us before that happened, would run it again from its
                # spec unless the spec we return hands back this module.
                del sys.modules[name]
                return importlib.machinery.ModuleSpec(
                    name, _AlreadyImported(imported),
                    is_package=hasattr(imported, "__path__"))
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None:
            return None
        if (name in _lazy_names and
                isinstance(spec.loader, importlib.machinery.SourceFileLoader)):
            spec.loader = _LazyLoader(spec.loader)
            return spec
        patches = _torch_patches.source_patches(name)
        if patches:
            _torch_patches.run_after(spec.loader, patches)
            return spec
        if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        copy = _manypy.prepare_extension(name, spec.origin)
        copied = importlib.util.spec_from_file_location(
            name, copy, loader=_CopiedExtensionLoader(name, copy, spec.origin),
            submodule_search_locations=spec.submodule_search_locations)
        patches = _torch_patches.extension_patches(name)
        if patches:
            _torch_patches.run_after(copied.loader, patches)
        return copied

    @classmethod
    def invalidate_caches(cls):
        importlib.machinery.PathFinder.invalidate_caches()


def define_module(name, source, filename):
    """Returns module `name`, first creating it from `source` if it does not
    exist yet (host code shipped as text, e.g. the model runtime)."""
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__file__ = filename
        exec(compile(source, filename, "exec"), module.__dict__)
        sys.modules[name] = module
    return module


_manypy.define_module = define_module
# torch_patches.py, embedded beside this file and handed over by the host.
_torch_patches = define_module("manypy_torch_patches", _manypy.torch_patches_source,
                               "<manypy:manypy_torch_patches>")
del _manypy.torch_patches_source

# Before the PathFinder (built-in and frozen modules need no copies).
sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder), ManypyExtensionFinder)
