#!/usr/bin/python3
"""make bench-batching: throughput and latency with dynamic batching on and off.

Starts two manypy-servers on the same repository, one with each model's
dynamic batching on and one with it off (--model-config NAME:dynamic_batching=...),
then drives them over gRPC with manypy-perf, alternating on and off in short
windows so that this VM's speed drifts fall on both alike. Each configuration
runs --repeats windows (rounds: on off, off on, ...); the figures are medians
over its windows.

Writes a JSON list of {"model", "batching", "concurrency", "infer_per_s",
"p50_ms", "p99_ms", "windows", "rounds": [each window's {"infer_per_s",
"p50_ms", "p99_ms"}]} and prints the table and the targets' verdicts
(tests/bench/bench_targets.py: round i's on over round i's off, the median
ratio's bootstrap 90% interval against the target):
  mlp_loop (Python-overhead-bound) at concurrency 64: on >= 2.5x off;
  resnet18 at concurrency 16: on >= 1.0x off;
  p50 at concurrency 1: on within 1.1x of off, for both models.
Exits 1 only if a target misses (an inconclusive one is printed as such).
"""
import argparse
import json
import os
import signal
import statistics
import sys

from bench_common import perf_window, start_manypy
from bench_targets import MIN_ROUNDS, any_missed, batching_targets, print_rows

CASES = [("mlp_loop", 64), ("mlp_loop", 1), ("resnet18", 16), ("resnet18", 1)]
# resnet18 takes ~65 ms an image on one core: longer windows for enough samples.
WINDOW_SCALE = {"mlp_loop": 1.0, "resnet18": 3.0}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--repository", default="build/model-repository")
    parser.add_argument("--out", default="bench-results/batching.json")
    parser.add_argument("--repeats", type=int, default=MIN_ROUNDS,
                        help=f"windows per configuration (rounds; at least {MIN_ROUNDS})")
    parser.add_argument("--window-seconds", type=float, default=1.5)
    parser.add_argument("--interpreters", type=int, default=2)
    args = parser.parse_args()
    if args.repeats < MIN_ROUNDS:
        parser.error(f"--repeats {args.repeats}: a verdict needs at least {MIN_ROUNDS} rounds")

    binary = os.path.join(args.build, "bin", "manypy-server")
    perf = os.path.join(args.build, "bin", "manypy-perf")
    models = sorted({m for m, _ in CASES})
    servers = {}
    try:
        for batching in (True, False):
            setting = [f"--model-config={m}:dynamic_batching={str(batching).lower()}" for m in models]
            servers[batching] = start_manypy(binary, args.repository, models, args.interpreters,
                                             setting)
        windows = {(m, c, b): [] for m, c in CASES for b in (True, False)}
        for rep in range(args.repeats):
            for model, concurrency in CASES:
                for batching in ((True, False) if rep % 2 == 0 else (False, True)):
                    record = perf_window(perf, servers[batching][1]["grpc"], model, concurrency,
                                         args.window_seconds * WINDOW_SCALE[model])
                    windows[(model, concurrency, batching)].append(record)
            print(f"round {rep + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    finally:
        for proc, _ in servers.values():
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)

    results = []
    for (model, concurrency, batching), records in windows.items():
        results.append({
            "model": model, "batching": batching, "concurrency": concurrency,
            "infer_per_s": statistics.median(r["infer_per_s"] for r in records),
            "p50_ms": statistics.median(r["p50_ms"] for r in records),
            "p99_ms": statistics.median(r["p99_ms"] for r in records),
            "windows": len(records),
            "rounds": [{k: r[k] for k in ("infer_per_s", "p50_ms", "p99_ms")} for r in records],
        })
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)

    print(f"{'model':<10} {'c':>3} {'batching':>8} {'infer/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for r in results:
        print(f"{r['model']:<10} {r['concurrency']:>3} {str(r['batching']):>8} "
              f"{r['infer_per_s']:>9.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}")
    rows = batching_targets(results)
    print_rows(rows)
    print(f"wrote {args.out}")
    return 1 if any_missed(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
