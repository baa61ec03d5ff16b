#!/usr/bin/python3
"""make bench-aoti: AOTInductor archives (platform torch_aoti) beside the same
model on the Python platform and as TorchScript (issue 41), on PyTorch >= 2.6.

1. At the model call: each archive loaded as manypy-server loads it, in a
   process of its own (tests/bench/bench_model_call.cc: the server's pool of
   2 interpreters and intra-op default, the platform's loader, Executable::Run
   from 2 threads), the three processes of a model measured in alternated
   rounds (the order flips every round). Per round the ratios AOTInductor /
   Python and AOTInductor / TorchScript; their median with a bootstrap 90%
   interval (tests/bench/paired_rounds.py) judged against the targets. Each
   process's peak resident size, after its rounds, for the memory target.
2. Served: the small model's AOTInductor archive over gRPC (manypy-server,
   2 interpreters, so 2 instances; dynamic batching off, each request one
   call), manypy-perf at concurrency 1 and 16, beside its model-call figure.

Models: "small" (bench-pool's 20 x Linear 8x8 + ReLU, batch 1), resnet18 and
resnet50 (models/, batch 1), packaged into --repository once (--force
repackages). Writes one JSON file; exit status 1 when a target misses.

    /usr/bin/python3 tests/bench/bench_aoti.py --build build --out bench-results/aoti.json
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"), os.path.join(REPO, "models")]

from bench_common import perf_window, start_manypy  # noqa: E402
from paired_rounds import bootstrap_interval, verdict, write_verdicts  # noqa: E402

PLATFORMS = ("python", "torchscript", "aoti")
SUFFIX = {"python": "", "torchscript": "_ts", "aoti": "_aoti"}
# (model, ratio key, target, higher is better); issue 41.
TARGETS = (
    ("small", "aoti_over_python", 4.0),
    ("small", "aoti_over_torchscript", 2.0),
    ("resnet18", "aoti_over_python", 1.1),
    ("resnet50", "aoti_over_python", 1.1),
)
RSS_TARGET_MODEL = "resnet50"  # peak RSS with 2 instances: AOTInductor <= Python


def build_model(name):
    """(model, signature kwargs, example inputs) for one benchmark model."""
    import torch
    if name == "small":
        from small_net_model import build
        return build(), {"inputs": [("INPUT__0", "FP32", [8])], "max_batch_size": 1}, \
            (torch.ones(1, 8),)
    import importlib
    module = importlib.import_module(name)
    return module.build(), dict(module.SIGNATURE), module.example_inputs()


def package(repository, name, force):
    """<name>.mpk, <name>_ts.mpk and <name>_aoti.mpk in `repository`."""
    import manypy.package
    import manypy.torchscript
    for platform in PLATFORMS:
        path = os.path.join(repository, f"{name}{SUFFIX[platform]}.mpk")
        if os.path.exists(path) and not force:
            continue
        start = time.monotonic()
        model, signature, example = build_model(name)
        archive_name = f"{name}{SUFFIX[platform]}"
        if platform == "torchscript":
            manypy.torchscript.export(model, path, name=archive_name, example_inputs=example,
                                      mode="trace", **signature)
        else:
            manypy.package.export(model, path, name=archive_name, example_inputs=example,
                                  format=platform, **signature)
        print(f"[aoti] packaged {path} in {time.monotonic() - start:.0f} s", file=sys.stderr)


class Caller:
    """manypy-bench-model-call on one archive, kept running between windows."""

    def __init__(self, binary, archive, threads, intra_op_threads=0):
        extra = ["--intra-op-threads", str(intra_op_threads)] if intra_op_threads else []
        self.proc = subprocess.Popen([binary, "--archive", archive, "--threads", str(threads),
                                      *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit(f"{binary} --archive {archive} did not start")

    def window(self, seconds):
        self.proc.stdin.write(f"{seconds}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit("manypy-bench-model-call ended during a window")
        r = json.loads(line)
        return {"per_s": r["calls"] / r["seconds"], "cpu_us": r["cpu_seconds"] / r["calls"] * 1e6,
                "peak_rss_bytes": r["peak_rss_bytes"]}

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def summary(values):
    return {"median": statistics.median(values), "interval": list(bootstrap_interval(values))}


def bench_model_call(binary, repository, name, rounds, seconds, threads):
    callers = {p: Caller(binary, os.path.join(repository, f"{name}{SUFFIX[p]}.mpk"), threads)
               for p in PLATFORMS}
    per_round = []
    try:
        for p in PLATFORMS:  # warm: caches, allocators, OpenMP's threads
            callers[p].window(min(1.0, seconds))
        for r in range(rounds):
            order = PLATFORMS if r % 2 == 0 else tuple(reversed(PLATFORMS))
            measured = {p: callers[p].window(seconds) for p in order}
            measured["aoti_over_python"] = measured["aoti"]["per_s"] / measured["python"]["per_s"]
            measured["aoti_over_torchscript"] = (measured["aoti"]["per_s"] /
                                                 measured["torchscript"]["per_s"])
            per_round.append(measured)
            print(f"[aoti] {name} round {r + 1}: " + ", ".join(
                f"{p} {measured[p]['per_s']:.0f}/s" for p in PLATFORMS) +
                f"; aoti/python {measured['aoti_over_python']:.2f}x, aoti/torchscript "
                f"{measured['aoti_over_torchscript']:.2f}x", file=sys.stderr)
    finally:
        for c in callers.values():
            c.close()
    result = {"threads": threads, "seconds_per_window": seconds, "rounds": per_round}
    for p in PLATFORMS:
        result[f"{p}_calls_per_s"] = summary([m[p]["per_s"] for m in per_round])
        result[f"{p}_peak_rss_mib"] = per_round[-1][p]["peak_rss_bytes"] / 2**20
    for key in ("aoti_over_python", "aoti_over_torchscript"):
        result[key] = summary([m[key] for m in per_round])
    return result


def bench_served(binaries, repository, model, seconds, concurrencies):
    """`model` served over gRPC by manypy-server (2 interpreters, dynamic
    batching off: a request is a call), manypy-perf --async at each
    concurrency: {"concurrency_C": {infer_per_s, p50_ms, p99_ms}}."""
    server, ports = start_manypy(os.path.join(binaries, "manypy-server"), repository, [model], 2,
                                 [f"--model-config={model}:dynamic_batching=false"])
    served = {}
    try:
        perf = os.path.join(binaries, "manypy-perf")
        perf_window(perf, ports["grpc"], model, 1, 1.0)  # warm
        for c in concurrencies:
            r = perf_window(perf, ports["grpc"], model, c, seconds, extra=["--async"])
            served[f"concurrency_{c}"] = {"infer_per_s": r["infer_per_s"], "p50_ms": r["p50_ms"],
                                          "p99_ms": r["p99_ms"]}
            print(f"[bench] served {model} c={c}: {r['infer_per_s']:.0f} infer/s, p50 "
                  f"{r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    return served

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--repository", default=None, help="default: BUILD/aoti-bench-repository")
    p.add_argument("--out", default="bench-results/aoti.json")
    p.add_argument("--models", default="small,resnet18,resnet50")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=2.0, help="per platform per round")
    p.add_argument("--force", action="store_true", help="repackage the archives")
    p.add_argument("--quick", action="store_true",
                   help="the small model only, 2 rounds of 0.5 s, judged but never failed on a "
                        "miss: keeps the benchmark working (ctest bench_aoti_quick)")
    a = p.parse_args()
    if a.quick:
        a.models, a.rounds, a.seconds = "small", 2, 0.5
    import manypy.aoti
    if manypy.aoti.torch_problem():
        print(f"bench-aoti: skipped: {manypy.aoti.torch_problem()}")
        return 0
    repository = a.repository or os.path.join(a.build, "aoti-bench-repository")
    os.makedirs(repository, exist_ok=True)
    models = a.models.split(",")
    for name in models:
        package(repository, name, a.force)
    binaries = os.path.join(a.build, "bin")
    result = {"cpus": os.cpu_count(), "model_call": {}, "targets": []}
    for name in models:
        result["model_call"][name] = bench_model_call(
            os.path.join(binaries, "manypy-bench-model-call"), repository, name, a.rounds,
            a.seconds, threads=2)
    if "small" in models:
        result["served_small_aoti"] = bench_served(binaries, repository, "small_aoti", a.seconds,
                                                   (1, 16))
        result["served_small_aoti"]["model_call_calls_per_s"] = \
            result["model_call"]["small"]["aoti_calls_per_s"]
    for name, key, target in TARGETS:
        if name in models:
            ratios = [m[key] for m in result["model_call"][name]["rounds"]]
            result["targets"].append(dict(verdict(ratios, target, True), model=name, ratio=key))
    if RSS_TARGET_MODEL in models:
        mc = result["model_call"][RSS_TARGET_MODEL]
        ok = mc["aoti_peak_rss_mib"] <= mc["python_peak_rss_mib"]
        result["targets"].append({"model": RSS_TARGET_MODEL, "ratio": "peak_rss_aoti_over_python",
                                  "median": mc["aoti_peak_rss_mib"] / mc["python_peak_rss_mib"],
                                  "target": 1.0, "higher_is_better": False,
                                  "verdict": "holds" if ok else "misses"})
    missed = write_verdicts(result, a.out)
    return 1 if missed and not a.quick else 0

if __name__ == "__main__":
    sys.exit(main())
