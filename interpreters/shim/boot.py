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


class _NoRegistrationLibrary:
    """torch.library.Library for interpreters other than the first.

    Registrations made by Python go into the one process-wide dispatcher;
    interpreter 0 already made them, and a second DEF of the same operator
    raises. Other interpreters keep the API but register nothing."""

    def __init__(self, ns, kind, dispatch_key=""):
        self.ns, self.kind, self.dispatch_key, self.m = ns, kind, dispatch_key, None

    def define(self, schema, alias_analysis=""):
        return schema.split("(")[0]

    def impl(self, op_name, fn, dispatch_key=""):
        pass


def _without_registrations(loader):
    run = loader.exec_module

    def exec_module(module):
        run(module)
        module.Library = _NoRegistrationLibrary

    loader.exec_module = exec_module


class ManypyExtensionFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None:
            return None
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
