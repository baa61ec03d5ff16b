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
    """torch.library.Library for interpreters other than the first (PyTorch 1.x).

    Registrations made by Python go into the one process-wide dispatcher;
    interpreter 0 already made them, and a second DEF of the same operator
    raises. Other interpreters keep the API but register nothing. (PyTorch 2.x
    routes each interpreter's own kernels instead: _tell_keyset.)"""

    class _NoRegistrationLibrary(Library):
        def __init__(self, ns, kind, dispatch_key=""):
            self.ns, self.kind, self.dispatch_key, self.m = ns, kind, dispatch_key, None
            self._op_defs, self._op_impls, self._registration_handles = set(), set(), []

        def define(self, schema, alias_analysis="", *, tags=()):
            return schema.strip().split("(")[0].strip()

        def impl(self, op_name, fn, dispatch_key="", *args, **kwargs):
            pass

        def fallback(self, *args, **kwargs):
            pass

        def _destroy(self):
            pass

    _NoRegistrationLibrary.__name__ = _NoRegistrationLibrary.__qualname__ = "Library"
    _NoRegistrationLibrary.__module__ = Library.__module__
    return _NoRegistrationLibrary


def _without_registrations(module):
    module.Library = _no_registration_library(module.Library)


def _after_running(loader, patch):
    """Runs patch(module) once `loader` has run the module's code."""
    run = loader.exec_module

    def exec_module(module):
        run(module)
        patch(module)

    loader.exec_module = exec_module


def _tell_keyset(module):
    """torch.library, PyTorch 2.x: every interpreter registers its kernels; the
    host routes each call to the calling interpreter's own (python_kernels.h).
    Library.impl tells the host whether the kernel takes the dispatch key set."""
    impl = module.Library.impl

    def impl_telling_keyset(self, op_name, fn, dispatch_key="", *, with_keyset=False, **kwargs):
        # kwargs: what a later torch adds (2.14: allow_override), passed on as given.
        _manypy.next_kernel_with_keyset(with_keyset)
        try:
            return impl(self, op_name, fn, dispatch_key, with_keyset=with_keyset, **kwargs)
        finally:
            _manypy.next_kernel_with_keyset(False)

    impl_telling_keyset.__doc__ = impl.__doc__
    impl_telling_keyset.__name__ = impl_telling_keyset.__qualname__ = "impl"
    module.Library.impl = impl_telling_keyset

    # Library._destroy calls the C++ library's reset(), which asserts that
    # this is the first interpreter (python_dispatch.cpp): drop the reference
    # instead, and the C++ library goes with its Python object, as reset()
    # would have made it go (registrations from Python stay: python_kernels.h).
    destroy = module.Library._destroy

    def destroy_without_reset(self):
        self.m = None
        destroy(self)

    destroy_without_reset.__doc__ = destroy.__doc__
    destroy_without_reset.__name__ = destroy_without_reset.__qualname__ = "_destroy"
    module.Library._destroy = destroy_without_reset


def _tell_torch_version(module):
    """torch.version, PyTorch 2.x: the host checks torch.__version__ as soon as
    it is known (torch/__init__.py imports this before torch._C), so the pool
    starts its other interpreters while interpreter 0 is still importing
    torch (pool.cc)."""
    _manypy.call_host("pool.torch_version", str(module.__version__))


def _kernels_of_this_interpreter(module):
    """torch._C, PyTorch 2.x: _dispatch_has_kernel_for_dispatch_key answers for
    this interpreter. A kernel that only other interpreters registered from
    Python (the dispatcher holds one router for all) is one this interpreter
    has not: torch's "already has a Meta kernel" checks (register_fake) must
    let it register its own."""
    has_kernel = module._dispatch_has_kernel_for_dispatch_key

    def has_kernel_here(name, dispatch):
        if not has_kernel(name, dispatch):
            return False
        key = dispatch if isinstance(dispatch, str) else dispatch.name
        return _manypy.python_kernel_registered_here(name, key) != 0

    has_kernel_here.__doc__ = has_kernel.__doc__
    has_kernel_here.__name__ = has_kernel_here.__qualname__ = has_kernel.__name__
    module._dispatch_has_kernel_for_dispatch_key = has_kernel_here


def _opaque_types_of_this_interpreter(module):
    """torch._C, PyTorch 2.14: torch._library.opaque_object registers each opaque
    type's name ("enum.Enum" at import) in one process-wide table of libtorch,
    which refuses a name registered before ("Type 'enum.Enum' is already
    registered as an opaque type"). A name another interpreter registered is
    the same type here; this interpreter registering a name twice still fails."""
    register = getattr(module, "_register_opaque_type", None)
    if register is None:
        return
    is_registered = module._is_opaque_type_registered
    mine = set()

    def register_here(name):
        if name not in mine and is_registered(name):
            mine.add(name)  # by another interpreter
            return None
        result = register(name)
        mine.add(name)
        return result

    register_here.__doc__ = register.__doc__
    register_here.__name__ = register_here.__qualname__ = register.__name__
    module._register_opaque_type = register_here


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
# torch.library registrations are no-ops (_no_registration_library), so
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


def _one_interpreter_at_a_time(load):
    """Inductor (PyTorch 2.x) hands its compiled kernel module the address of
    this interpreter's tensor accessor through a process-wide environment
    variable read while the module initialises: two interpreters loading
    kernels at once would each be able to read the other's. An flock on a
    file opened by each interpreter (its own open file description) makes the
    variable and the load one step across the process."""
    import fcntl
    import os
    import tempfile
    path = os.path.join(tempfile.gettempdir(), "manypy-extension-load.lock")

    def locked(cls, path_, key):
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # releases this interpreter's GIL while it waits
            return load.__func__(cls, path_, key)
        finally:
            os.close(fd)  # and with it the lock

    return classmethod(locked)


def _patch_inductor_codecache(module):
    bindings = module.CppPythonBindingsCodeCache
    bindings._load_library_inner = _one_interpreter_at_a_time(
        bindings.__dict__["_load_library_inner"])


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
        if name == "torch.library" and _manypy.routes_python_kernels:
            _after_running(spec.loader, _tell_keyset)
            return spec
        if name == "torch.version" and _manypy.routes_python_kernels:
            _after_running(spec.loader, _tell_torch_version)
            return spec
        if name == "torch._inductor.codecache":
            _after_running(spec.loader, _patch_inductor_codecache)
            return spec
        if name == "torch.library" and not _manypy.owns_registrations:
            _after_running(spec.loader, _without_registrations)
            return spec
        if not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return spec
        copy = _manypy.prepare_extension(name, spec.origin)
        copied = importlib.util.spec_from_file_location(
            name, copy, loader=_CopiedExtensionLoader(name, copy, spec.origin),
            submodule_search_locations=spec.submodule_search_locations)
        if name == "torch._C" and _manypy.routes_python_kernels:
            _after_running(copied.loader, _kernels_of_this_interpreter)
            _after_running(copied.loader, _opaque_types_of_this_interpreter)
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

# Before the PathFinder (built-in and frozen modules need no copies).
sys.meta_path.insert(sys.meta_path.index(importlib.machinery.PathFinder), ManypyExtensionFinder)
