#!/usr/bin/python3
"""make bench-extensions: Triton's extensions for local and repeated traffic,
each against its baseline measured in the same run, in alternated rounds.

cache: resnet18 (batch 1, 3x224x224 FP32, over gRPC, concurrency 1) with the
response cache on: a repeated request (the same image every time: answered
from the cache after the first) against a computed one (a new image every
time: always a miss, so it pays the key and the insert on top of the model).
Per round the p50 of each side; over the rounds the ratio's median with a
bootstrap 90% interval and the verdict for the target (<= 0.1x).

The parts (--parts) write one section each of the JSON; system shared memory
(the issue's 4 MB and 64 MB comparison) is not built yet and has no part.

    /usr/bin/python3 tests/bench/bench_extensions.py --build build \\
        --repository build/model-repository --out bench-results/extensions.json
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "clients", "python")]

import numpy as np  # noqa: E402

from bench_common import start_manypy  # noqa: E402
from paired_rounds import bootstrap_interval, verdict  # noqa: E402

CACHE_TARGET = 0.1  # a repeated request's p50 over a computed one's


def p50_ms(call, requests):
    """The median wall time of `requests` calls of call(i), in milliseconds."""
    times = []
    for i in range(requests):
        start = time.perf_counter()
        call(i)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def run_cache(args):
    from manypy.client import InferenceClient
    proc, ports = start_manypy(os.path.join(args.build, "bin", "manypy-server"), args.repository,
                               ["resnet18"], args.interpreters,
                               ["--response-cache-bytes=256MiB",
                                "--model-config=resnet18:response_cache=true"])
    try:
        client = InferenceClient(f"127.0.0.1:{ports['grpc']}", timeout=60)
        rng = np.random.default_rng(1)
        same = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
        expected = client.infer("resnet18", {"INPUT__0": same}).as_numpy("OUTPUT__0")
        def images():  # a new image every call: never in the cache
            while True:
                yield rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
        fresh = images()
        # Warm-up: both paths, the allocator and the connection.
        for _ in range(5):
            client.infer("resnet18", {"INPUT__0": next(fresh)})
            client.infer("resnet18", {"INPUT__0": same})

        def repeated(_):
            out = client.infer("resnet18", {"INPUT__0": same}).as_numpy("OUTPUT__0")
            if not np.array_equal(out, expected):
                raise SystemExit("a cached answer differs from the computed one")

        def computed(_):
            client.infer("resnet18", {"INPUT__0": next(fresh)})

        rounds = []
        for r in range(args.rounds):
            # Alternated: which side goes first changes every round.
            sides = [("computed", computed), ("repeated", repeated)]
            if r % 2:
                sides.reverse()
            measured = {name: p50_ms(call, args.requests) for name, call in sides}
            measured["ratio"] = measured["repeated"] / measured["computed"]
            rounds.append(measured)
            print(f"cache round {r + 1}/{args.rounds}: computed p50 {measured['computed']:.2f} ms, "
                  f"repeated p50 {measured['repeated']:.3f} ms, ratio {measured['ratio']:.4f}",
                  flush=True)
        stats = client.model_statistics("resnet18")
        client.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    out = {"model": "resnet18", "shape": [1, 3, 224, 224], "protocol": "grpc", "concurrency": 1,
           "requests_per_side_per_round": args.requests, "rounds": rounds}
    for side in ("computed", "repeated"):
        values = [r[side] for r in rounds]
        out[f"{side}_p50_ms"] = {"median": statistics.median(values),
                                 "interval": list(bootstrap_interval(values))}
    out["repeated_over_computed"] = verdict([r["ratio"] for r in rounds], CACHE_TARGET,
                                            higher_is_better=False)
    out["server_statistics"] = stats
    return out


PARTS = {"cache": run_cache}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--repository", default="build/model-repository")
    ap.add_argument("--out", default="bench-results/extensions.json")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=40, help="per side per round")
    ap.add_argument("--interpreters", type=int, default=2)
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        ap.error(f"--parts: unknown {unknown} (known: {', '.join(PARTS)})")
    result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpus": os.cpu_count()}
    for part in parts:
        result[part] = PARTS[part](args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    failed = [p for p in parts for k, v in result[p].items()
              if isinstance(v, dict) and v.get("verdict") == "misses"]
    for part in parts:
        for key, v in result[part].items():
            if isinstance(v, dict) and "verdict" in v:
                print(f"{part} {key}: {v['median']:.4f} [{v['interval'][0]:.4f}, "
                      f"{v['interval'][1]:.4f}] target {v['target']}: {v['verdict']}")
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
