"""Checks that every place that must carry manypy's version carries the one in
VERSION: both copies of the Python package's __init__.py (__version__) and
the example Kubernetes overlay's image tag. The C++ side reads VERSION itself
(CMake). Usage: check_version.py REPOSITORY_ROOT. Exits 1 naming each file
that differs."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
version = (root / "VERSION").read_text().strip()
places = {
    "package_format/python/manypy/__init__.py": r'^__version__ = "([^"]*)"$',
    "clients/python/manypy/__init__.py": r'^__version__ = "([^"]*)"$',
    "deploy/kubernetes/overlays/example/kustomization.yaml":
        r'name: manypy-server\n\s+newName: [^\n]+\n\s+newTag: "([^"]*)"',
}
wrong = []
for path, pattern in places.items():
    found = re.search(pattern, (root / path).read_text(), re.MULTILINE)
    if found is None:
        wrong.append(f"{path}: no version found (pattern {pattern!r})")
    elif found.group(1) != version:
        wrong.append(f"{path}: {found.group(1)!r}, but VERSION says {version!r}")
if wrong:
    print("\n".join(wrong))
    sys.exit(1)
print(f"version {version}: VERSION and its {len(places)} copies agree")
