"""Keeps the production sources small enough to read: fails naming every
source file under the production folders longer than 450 lines, and
server/main.cc if longer than 80 (it only fills options and starts the
server). Limits that no test keeps slip. Tests are not held to it.
Usage: check_source_sizes.py REPOSITORY_ROOT. Exits 1 naming each file."""
import os
import sys

FOLDERS = ("server", "interpreters", "package_format", "common", "clients", "tools", "fuzz")
SOURCE_SUFFIXES = (".cc", ".h", ".c", ".cpp", ".hpp", ".py", ".sh", ".cmake", ".proto")
LIMIT = 450
MAIN = "server/main.cc"
MAIN_LIMIT = 80


def is_source(name):
    return name.endswith(SOURCE_SUFFIXES) or name == "CMakeLists.txt"


def line_count(path):
    with open(path, "rb") as f:
        return len(f.read().splitlines())


def too_long(root):
    """(relative path, lines, limit) of each production source over its limit, sorted."""
    found = []
    for folder in FOLDERS:
        for directory, subdirectories, files in os.walk(os.path.join(root, folder)):
            # Caches and hidden folders are no one's source.
            subdirectories[:] = sorted(d for d in subdirectories
                                       if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                if not is_source(name):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root).replace(os.sep, "/")
                limit = MAIN_LIMIT if relative == MAIN else LIMIT
                lines = line_count(path)
                if lines > limit:
                    found.append((relative, lines, limit))
    return found


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    root = argv[1]
    if not os.path.isfile(os.path.join(root, MAIN)):
        print(f"{root}: no {MAIN}: not the repository's root")
        return 2
    found = too_long(root)
    for relative, lines, limit in found:
        print(f"{relative}: {lines} lines, over the limit of {limit}: split it along a seam "
              "of responsibility (a new file with one job)")
    if found:
        return 1
    print(f"every production source is at most {LIMIT} lines, {MAIN} at most {MAIN_LIMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
