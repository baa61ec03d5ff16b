#!/usr/bin/python3
"""Checks that docs/operations.md documents exactly the flags of manypy-server --help.

    /usr/bin/python3 tests/docs/check_flags_documented.py build/bin/manypy-server docs/operations.md

A flag is in --help when a line starts with two spaces and `--name` (the
usage text's layout: flags at column 2, descriptions at column 29). A flag is
documented when a Markdown table row's first cell starts with `--name`
in backquotes (`| `--grpc-port=PORT` | 8001 | ... |`). Exits 0 when the two
sets are equal; otherwise prints each flag missing on either side (and any
documented twice) and exits 1.
"""
import re
import subprocess
import sys

HELP_FLAG = re.compile(r"^  (--[a-z0-9][a-z0-9-]*)(?=[=\s]|$)")
DOC_FLAG = re.compile(r"^\|\s*`(--[a-z0-9][a-z0-9-]*)(?=[=` ])")


def help_flags(server):
    proc = subprocess.run([server, "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        sys.exit(f"{server} --help exited {proc.returncode}: {proc.stderr.strip()}")
    flags = [m.group(1) for m in map(HELP_FLAG.match, proc.stdout.splitlines()) if m]
    if not flags:
        sys.exit(f"{server} --help lists no flags (is its layout still `  --flag ...`?)")
    return flags


def documented_flags(doc):
    with open(doc, encoding="utf-8") as f:
        return [m.group(1) for m in map(DOC_FLAG.match, f) if m]


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    server, doc = argv[1], argv[2]
    in_help, in_doc = help_flags(server), documented_flags(doc)
    problems = []
    undocumented = [f for f in in_help if f not in in_doc]
    if undocumented:
        problems.append(f"in `manypy-server --help` but not in {doc}: {', '.join(undocumented)}")
    unknown = [f for f in dict.fromkeys(in_doc) if f not in in_help]
    if unknown:
        problems.append(f"in {doc} but not in `manypy-server --help`: {', '.join(unknown)}")
    twice = sorted({f for f in in_doc if in_doc.count(f) > 1})
    if twice:
        problems.append(f"documented more than once in {doc}: {', '.join(twice)}")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"{len(in_help)} flags: --help and {doc} agree")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
