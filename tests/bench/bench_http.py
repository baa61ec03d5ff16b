#!/usr/bin/python3
"""make bench-http: HTTP/REST (binary data) vs gRPC throughput and latency.

Starts one manypy-server (both endpoints, 2 interpreters) and drives it with
manypy-perf over gRPC and over HTTP (-i http: inputs and outputs as binary
data, a keep-alive connection per sender thread), alternating the protocols
in short windows so that this VM's speed drifts fall on both alike. Cases:
two_io (small: the protocol's own cost dominates) and resnet18, at
concurrency 1 and 16. Each configuration runs --repeats windows; the figures
are medians over its windows.

Writes a JSON list of manypy-perf records (medians) with "model",
"protocol" and "windows" added, and prints the table and the target:
resnet18 at concurrency 16, HTTP >= 0.8x gRPC throughput.
"""
import argparse
import json
import os
import signal
import statistics
import sys

from bench_common import perf_window, start_manypy

CASES = [("two_io", 1), ("two_io", 16), ("resnet18", 1), ("resnet18", 16)]
# resnet18 takes ~65 ms an image on one core: longer windows for enough samples.
WINDOW_SCALE = {"two_io": 1.0, "resnet18": 3.0}
PROTOCOLS = ("grpc", "http")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--repository", default="build/model-repository")
    parser.add_argument("--out", default="bench-results/http.json")
    parser.add_argument("--repeats", type=int, default=5, help="windows per configuration")
    parser.add_argument("--window-seconds", type=float, default=1.5)
    parser.add_argument("--interpreters", type=int, default=2)
    args = parser.parse_args()

    binary = os.path.join(args.build, "bin", "manypy-server")
    perf = os.path.join(args.build, "bin", "manypy-perf")
    proc, ports = start_manypy(binary, args.repository, sorted({m for m, _ in CASES}),
                               args.interpreters)
    windows = {(m, c, p): [] for m, c in CASES for p in PROTOCOLS}
    try:
        for rep in range(args.repeats):
            for model, concurrency in CASES:
                for protocol in (PROTOCOLS if rep % 2 == 0 else PROTOCOLS[::-1]):
                    windows[(model, concurrency, protocol)].append(
                        perf_window(perf, ports[protocol], model, concurrency,
                                    args.window_seconds * WINDOW_SCALE[model], protocol))
            print(f"round {rep + 1}/{args.repeats} done", file=sys.stderr, flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    results = []
    for (model, concurrency, protocol), records in windows.items():
        record = dict(records[0])
        for key in ("infer_per_s", "requests_per_s", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "avg_ms"):
            record[key] = statistics.median(r[key] for r in records)
        record.update({"model": model, "protocol": protocol, "concurrency": concurrency,
                       "windows": len(records),
                       "requests": sum(r["requests"] for r in records),
                       "successes": sum(r["successes"] for r in records)})
        results.append(record)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)

    def get(model, concurrency, protocol):
        return next(r for r in results if (r["model"], r["concurrency"], r["protocol"]) ==
                    (model, concurrency, protocol))

    print(f"{'model':<10} {'c':>3} {'protocol':>8} {'infer/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for r in results:
        print(f"{r['model']:<10} {r['concurrency']:>3} {r['protocol']:>8} "
              f"{r['infer_per_s']:>9.1f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f}")
    for model, concurrency in CASES:
        ratio = get(model, concurrency, "http")["infer_per_s"] / get(model, concurrency, "grpc")["infer_per_s"]
        target = " (target >= 0.8: " + ("holds)" if ratio >= 0.8 else "MISSED)") \
            if (model, concurrency) == ("resnet18", 16) else ""
        print(f"{model} c={concurrency} throughput http/grpc: {ratio:.2f}{target}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
