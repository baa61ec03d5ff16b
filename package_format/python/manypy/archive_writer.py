"""Writing an archive: torch.package's exporter, given the dependency
patterns, runs the caller's writes into a temporary file beside the target,
records what the archive's code needs of the server (optional extern
modules, torch.compile), runs the caller's check on the finished file and
only then moves it into place."""

import os
import shutil
import tempfile
import warnings

from torch.package import PackageExporter
from torch.package.package_exporter import PackagingError

from . import dependencies as _dependencies
from . import source_scan as _source_scan
from .layout import (OPTIONAL_MODULES_PACKAGE, OPTIONAL_MODULES_RESOURCE, USES_COMPILE_PACKAGE,
                     USES_COMPILE_RESOURCE)
from .model_module import MAIN_MESSAGE


def write_archive(path, write, intern, extern, required_intern=None, check=None):
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
                _dependencies.apply_patterns(exporter, intern, extern, required_intern)
                write(exporter)
                graph = exporter.dependency_graph
                optional = _source_scan.optional_externs(graph, _dependencies.extern_nodes(graph))
                if optional:
                    exporter.save_text(OPTIONAL_MODULES_PACKAGE, OPTIONAL_MODULES_RESOURCE,
                                       "".join(f"{m}\n" for m in optional))
                file_uses = _source_scan.file_uses(graph)
                if _source_scan.compiles(graph):
                    exporter.save_text(USES_COMPILE_PACKAGE, USES_COMPILE_RESOURCE, "")
        except PackagingError as e:
            text = str(e)
            if "__main__" in text:
                raise ValueError(MAIN_MESSAGE.format(what="the model refers to __main__")
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


_FILE_USE_WARNING = (
    "the archive's code uses __file__ ({where}) and the load check did not run: an archived "
    "module has no folder on disk, so files found next to it are not there when the server "
    "loads it (read them while building the model, before packaging)")
