# Runs first in every manypy interpreter, before `site`: routes every
# extension-module import to this interpreter's private copy of the module
# (prepared by the host on first import), so each interpreter has its own
# CPython runtime and module state while all share one libtorch.
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


def _no_registration_library(Library):
    """torch.library.Library for interpreters other than the first.

    Registrations made by Python go into the one process-wide dispatcher;
    interpreter 0 already made them, and a second DEF of the same operator
    raises. Other interpreters keep the API but register nothing. A subclass of
    the real Library: torch 2.x's torch.library.impl / define dispatch on the
    type (functools.singledispatch), e.g. torch.distributed.fsdp's
    `@torch.library.impl(lib, "copy_", "Meta")` at `import torch._dynamo`."""

    class _NoRegistrationLibrary(Library):
        def __init__(self, ns, kind, dispatch_key=""):
            self.ns, self.kind, self.dispatch_key, self.m = ns, kind, dispatch_key, None
            self._op_defs, self._op_impls, self._registration_handles = set(), set(), []

        def define(self, schema, alias_analysis="", *, tags=()):
            # torch 2.x: define the schema if the first interpreter has not
            # (yet), so torch.ops.<ns>.<name> resolves here; kernels stay the
            # first interpreter's (impl below registers none).
            schema = schema.strip()
            name = schema.split("(")[0].strip()
            if hasattr(_manypy, "define_operator"):
                _manypy.define_operator(schema if "::" in name else f"{self.ns}::{schema}")
            return name

        def impl(self, op_name, fn, dispatch_key="", *args, **kwargs):
            pass

        def fallback(self, *args, **kwargs):
            pass

        # torch 2.x: registers a Meta kernel through a Library of its own and
        # refuses an operator that interpreter 0 already gave one
        # (torch/_library/fake_impl.py).
        def _register_fake(self, *args, **kwargs):
            pass

        def _impl_with_aoti_compile(self, *args, **kwargs):
            pass

        def _destroy(self):
            pass

    _NoRegistrationLibrary.__name__ = _NoRegistrationLibrary.__qualname__ = "Library"
    _NoRegistrationLibrary.__module__ = Library.__module__
    return _NoRegistrationLibrary


def _without_registrations(loader):
    run = loader.exec_module

    def exec_module(module):
        run(module)
        module.Library = _no_registration_library(module.Library)

    loader.exec_module = exec_module


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
        if f"{self.__name__}.{attr}" in _lazy_function_names:
            stand_in = _lazy_function(self.__name__, attr)
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
            parts = module_name.split(".")
            for end in range(1, len(parts) + 1):
                module = sys.modules.get(".".join(parts[:end]))
                if type(module) is _LazyModule:
                    _run_lazy_module(module)
            real = getattr(importlib.import_module(module_name), name)
        return real(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__module__ = module_name
    call.__doc__ = f"manypy's stand-in for {module_name}.{name}: runs {module_name} at its first call"
    return call


# name -> the loader that runs the module's code, while it has not run.
_lazy_loaders = {}

# Imported lazily here: PoolOptions::lazy_modules and, in every interpreter but
# the one that makes the process-global registrations (and only when lazy
# imports are on), torch._meta_registrations: there its torch.library
# registrations are no-ops (_no_registration_library), so running it at
# `import torch` would only build Python objects (its meta kernels, torch._refs,
# torch._prims, about 9 MiB) that nothing in eager execution uses.
_lazy_names = frozenset(_manypy.lazy_modules) | (
    {"torch._meta_registrations"}
    if _manypy.lazy_modules and not _manypy.owns_registrations else set())

# PoolOptions::lazy_functions, and the modules that hold them with their
# parent packages below the top one (which `import torch` ran already): lazy
# too, so that importing the function's module runs none of them.
_lazy_function_names = frozenset(_manypy.lazy_functions)
_lazy_names |= {
    ".".join(parts[:end])
    for parts in (f.split(".")[:-1] for f in _lazy_function_names)
    for end in range(2, len(parts) + 1)}


def _run_lazy_module(module):
    name = module.__name__
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
        if name == "torch.library" and not _manypy.owns_registrations:
            _without_registrations(spec.loader)
            return spec
        if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        copy = _manypy.prepare_extension(name, spec.origin)
        return importlib.util.spec_from_file_location(
            name, copy, loader=_CopiedExtensionLoader(name, copy, spec.origin),
            submodule_search_locations=spec.submodule_search_locations)

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

# Before the PathFinder (built-in and frozen modules need no copies).
sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder), ManypyExtensionFinder)
