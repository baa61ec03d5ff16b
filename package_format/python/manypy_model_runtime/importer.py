# Opening an archive as the server does: torch.package's importer with the
# archive's modules findable by name, storages taken from the host's mapping,
# the extern modules checked first, and no process-long reference left
# behind in linecache.
import functools
import importlib
import linecache
import sys
import weakref

from torch.package import PackageImporter

from manypy_model_runtime.errors import MissingModulesError

OPTIONAL_MODULES_RECORD = "manypy/optional_modules"


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
