"""Which modules an archive carries and which the server's Python provides:
the user's own code is interned (its source ships in the archive); every
module installed in the packaging Python (its site-packages / dist-packages
folders, the standard library, torch, numpy, torchvision) is extern; the
server's API (`manypy`) is mocked."""

import importlib.util
import os
import site
import sys

from torch.package.package_exporter import _ModuleProviderAction

# Always provided by the server's Python, never copied into an archive. sys
# and io are not implicitly extern in torch.package (its _DISALLOWED_MODULES),
# but every manypy interpreter is a real CPython with its own sys and io.
DEFAULT_EXTERN = (
    "torch", "torch.**", "numpy", "numpy.**", "torchvision", "torchvision.**",
    "sys", "io",
)
# What a model calls of the server (manypy.infer, request, log): mocked in the
# archive (which keeps its manifest under manypy/, so manypy cannot be
# extern), and replaced at load by the server's own module (manypy_model_runtime).
SERVER_API_MODULES = ("manypy", "manypy.**")
DEFAULT_INTERN = ("**",)
# Folders whose modules count as installed (so extern by default): besides
# site.getsitepackages() and the user's site folder, any sys.path entry with
# one of these names (a virtualenv's, or a folder set up as one).
SITE_FOLDER_NAMES = ("site-packages", "dist-packages")


def apply_patterns(exporter, intern, extern, required_intern=None):
    """Gives a PackageExporter the patterns above, the user's intern and
    extern patterns (lists or None) and the module that must be interned
    (a factory's), in the order torch.package needs: it applies the first
    pattern that matches."""
    # Explicit extern and intern patterns win over the installed modules
    # (a user can still intern an installed package).
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


def extern_nodes(graph):
    """The modules of an exporter's dependency graph that are extern."""
    return [name for name in graph.nodes
            if graph.nodes[name].get("action") == _ModuleProviderAction.EXTERN]


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
