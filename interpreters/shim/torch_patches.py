# What each interpreter changes in torch's own modules as they load, so that
# many interpreters share one libtorch: torch.library's registrations, the
# version check, the kernels and opaque types of torch._C, Inductor's kernel
# loading. boot.py defines this module (as manypy_torch_patches) and its
# import finder applies the patches; each runs in the importing thread, with
# that module's import lock and this interpreter's GIL held.
import _manypy


def source_patches(name):
    """The patches to run after pure-Python module `name`'s code, in order."""
    if name == "torch.library" and _manypy.routes_python_kernels:
        return [_tell_keyset]
    if name == "torch.version" and _manypy.routes_python_kernels:
        return [_tell_torch_version]
    if name == "torch._inductor.codecache":
        return [_patch_inductor_codecache]
    if name == "torch.library" and not _manypy.owns_registrations:
        return [_without_registrations]
    return []


def extension_patches(name):
    """The patches to run after extension module `name` (its private copy) loads."""
    if name == "torch._C" and _manypy.routes_python_kernels:
        return [_kernels_of_this_interpreter, _opaque_types_of_this_interpreter]
    return []


def run_after(loader, patches):
    """Runs each of `patches` on the module once `loader` has run its code."""
    run = loader.exec_module

    def exec_module(module):
        run(module)
        for patch in patches:
            patch(module)

    loader.exec_module = exec_module


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
