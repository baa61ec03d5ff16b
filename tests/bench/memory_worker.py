#!/usr/bin/python3
"""One model-server worker process, for manypy-bench-memory's `processes` mode.

    OMP_NUM_THREADS=1 /usr/bin/python3 tests/bench/memory_worker.py ARCHIVE [SHAPE]

Does what a TorchServe handler or a Triton python-backend model instance does
in its own process: imports torch, loads the model from the archive with
torch.package (the manifest's entry point, weights read into this process's
own memory), and runs one inference so lazily allocated state is counted (on a random FP32
input of SHAPE, e.g. 1,256; default 1,3,224,224, an image).
Reports on stdout, one line each, flushed at once (the parent reads them
through a pipe):

    loaded <seconds since this script started>
    rss <VmRSS bytes after the inference>

then waits until stdin is closed, so the parent can have all N workers alive
(and measured) at the same time. Any failure is a traceback on stderr and a
non-zero exit, which the parent sees as a missing line.
"""
import time

START = time.monotonic()  # before `import torch`: its cost is part of loading

import json
import sys

import torch
from torch.package import PackageImporter


def vm_rss_bytes():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024  # the kernel reports kB
    raise RuntimeError("no VmRSS in /proc/self/status")


def load_model(path):
    importer = PackageImporter(path)
    # The manifest is an ordinary resource of the archive (package "manypy").
    manifest = json.loads(importer.load_text("manypy", "manifest.json"))
    entry = manifest["entry_point"]
    kind = entry.get("kind", "pickle")
    if kind == "pickle":
        model = importer.load_pickle(entry["package"], entry["resource"])
    elif kind == "factory":
        model = getattr(importer.import_module(entry["module"]), entry["function"])()
        if entry.get("weights_resource"):
            model.load_state_dict(importer.load_pickle(entry["weights_package"],
                                                       entry["weights_resource"]))
    else:
        raise ValueError(f"unknown entry point kind {kind!r}")
    if isinstance(model, torch.nn.Module):
        model.eval()
    return model


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit("usage: memory_worker.py ARCHIVE [SHAPE]")
    shape = [int(d) for d in argv[2].split(",")] if len(argv) == 3 else [1, 3, 224, 224]
    # The same intra-op thread count as the pool's (the parent also sets
    # OMP_NUM_THREADS=1, which covers threads created before this line).
    torch.set_num_threads(1)
    model = load_model(argv[1])
    print(f"loaded {time.monotonic() - START:.3f}", flush=True)
    with torch.inference_mode():
        model(torch.randn(*shape))
    print(f"rss {vm_rss_bytes()}", flush=True)
    sys.stdin.read()  # returns at EOF: the parent has measured everyone


if __name__ == "__main__":
    main(sys.argv)
