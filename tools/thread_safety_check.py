#!/usr/bin/python3
"""Clang's lock analysis over every manypy translation unit.

Reads the build's compile_commands.json (a g++ build), reruns each of the project's
own files (not generated ones) through clang++ -fsyntax-only -Wthread-safety
-Werror=thread-safety: semantic analysis only, no code generation, no link. Fails
when a GUARDED_BY field is touched without its lock, a REQUIRES function is called
without it, and so on (common/thread_annotations.h). Exits 77 (ctest: skipped) when
no clang++ is installed. Usage: thread_safety_check.py --build BUILD [--jobs N] [--only PATH_PART]
"""
import argparse
import concurrent.futures
import json
import os
import shlex
import shutil
import subprocess
import sys
import time

SKIPPED = 77
# g++ flags clang does not know, and the warning choices of the g++ build: only
# the thread-safety diagnostics matter here.
DROPPED_FLAGS = {"-fno-gnu-unique"}
CHECK_FLAGS = ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety"]


def clang_command(entry, clang):
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out = [clang]
    skip_next = False
    for arg in args[1:]:
        if skip_next:
            skip_next = False
        elif arg == "-o":
            skip_next = True
        elif arg == "-c" or arg in DROPPED_FLAGS or (arg.startswith("-W") and not arg.startswith("-Wl,")):
            pass
        else:
            out.append(arg)
    return out + CHECK_FLAGS


def check(entry, clang):
    started = time.monotonic()
    run = subprocess.run(clang_command(entry, clang), cwd=entry["directory"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return entry["file"], run.returncode, run.stdout, time.monotonic() - started


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", required=True, help="build folder with compile_commands.json")
    parser.add_argument("--source", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--clang", default=shutil.which("clang++") or shutil.which("clang++-14"))
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--only", default="", help="check only the files whose path has this")
    options = parser.parse_args()
    if not options.clang:
        print("thread_safety_check: SKIPPED: no clang++ on PATH (Debian package clang, "
              "tools/debian-packages.txt; `make deps` installs it)")
        return SKIPPED
    database = os.path.join(os.path.abspath(options.build), "compile_commands.json")
    with open(database) as f:
        entries = json.load(f)
    source = os.path.realpath(options.source) + os.sep
    build = os.path.realpath(options.build) + os.sep
    # The project's own files: generated ones (protobuf, embedded text) have no locks.
    entries = [e for e in entries
               if os.path.realpath(e["file"]).startswith(source)
               and not os.path.realpath(e["file"]).startswith(build)
               and options.only in e["file"]]
    version = subprocess.run([options.clang, "--version"], stdout=subprocess.PIPE,
                             text=True).stdout.splitlines()[0]
    print(f"thread_safety_check: {len(entries)} translation units, {version}, "
          f"{options.jobs} jobs", flush=True)
    started = time.monotonic()
    failed = []
    with concurrent.futures.ThreadPoolExecutor(options.jobs) as pool:
        for path, rc, output, _ in pool.map(lambda e: check(e, options.clang), entries):
            if rc != 0:
                failed.append(os.path.relpath(path, source))
                sys.stdout.write(output)
    seconds = time.monotonic() - started
    if failed:
        print(f"thread_safety_check: FAILED in {seconds:.0f} s: {len(failed)} of {len(entries)} "
              f"translation units: " + " ".join(failed))
        return 1
    print(f"thread_safety_check: clean: {len(entries)} translation units in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
