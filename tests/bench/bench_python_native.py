#!/usr/bin/python3
"""make bench-python-native: what an in-process server does that a server of
processes cannot, measured against the nearest thing a client can do.

Nested calls: a trivial callee (noop) called from a model with manypy.infer
(nested_caller, which times the call itself), against the same two models
called in turn by a client over gRPC (plain_caller, then noop: the hop a
process-based server's composition pays at the least, client-measured), at
concurrency 1 and 16, in alternated rounds. Per round: the median and p99
of each side; over the rounds, each median with a bootstrap 90% interval and
the verdict for the target (<= 50 us per nested call at concurrency 1).

Streaming: models/char_lm over gRPC (ModelStreamInfer) and server-sent
events (/generate_stream) at concurrency 1 and 16: time to first response,
responses per second, and 1,000 streams checked for a lost or reordered
response (each prompt's text is fixed, so every stream must equal the first).

    /usr/bin/python3 tests/bench/bench_python_native.py --build build \\
        --repository build/model-repository --out bench-results/python_native.json
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python")]

import numpy as np  # noqa: E402

from bench_common import start_manypy  # noqa: E402
from paired_rounds import bootstrap_interval, verdict  # noqa: E402

NESTED_TARGET_US = 50.0


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def package_nested_models(folder):
    import manypy.package
    import python_native_models as m
    io = {"inputs": [("INPUT__0", "FP32", [-1])]}
    two = [("OUTPUT__0", "FP32", [-1]), ("NESTED_S", "FP64", [1])]
    manypy.package.export(m.Noop(), os.path.join(folder, "noop.mpk"), name="noop",
                          outputs=[("OUTPUT__0", "FP32", [-1])], **io)
    manypy.package.export(m.NestedCaller(), os.path.join(folder, "nested_caller.mpk"),
                          name="nested_caller", outputs=two, **io)
    manypy.package.export(m.PlainCaller(), os.path.join(folder, "plain_caller.mpk"),
                          name="plain_caller", outputs=two, **io)


def run_clients(concurrency, seconds, one_call):
    """Runs one_call(client_index) in `concurrency` threads for `seconds`;
    returns the list of what each call returned."""
    out, lock, stop = [], threading.Lock(), time.monotonic() + seconds

    def loop(i):
        mine = []
        while time.monotonic() < stop:
            mine.append(one_call(i))
        with lock:
            out.extend(mine)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def nested_rounds(address, rounds, seconds):
    from manypy.client import InferenceClient
    x = {"INPUT__0": np.ones(4, np.float32)}
    results = {}
    for concurrency in (1, 16):
        clients = [InferenceClient(address, timeout=30) for _ in range(concurrency)]
        for c in clients:  # connected and warm before anything is measured
            c.infer("nested_caller", x)
            c.infer("noop", x)
        per_round = []
        for r in range(rounds):
            sides = ["nested", "grpc"] if r % 2 == 0 else ["grpc", "nested"]
            measured = {}
            for side in sides:
                if side == "nested":
                    calls = run_clients(concurrency, seconds, lambda i: float(
                        clients[i].infer("nested_caller", x).as_numpy("NESTED_S")[0]) * 1e6)
                else:
                    def pair(i):
                        clients[i].infer("plain_caller", x)
                        start = time.perf_counter()
                        clients[i].infer("noop", x)
                        return (time.perf_counter() - start) * 1e6
                    calls = run_clients(concurrency, seconds, pair)
                measured[side] = {"median_us": statistics.median(calls),
                                  "p99_us": percentile(calls, 99), "calls": len(calls)}
            measured["ratio"] = measured["nested"]["median_us"] / measured["grpc"]["median_us"]
            per_round.append(measured)
            print(f"[python-native] nested c={concurrency} round {r + 1}: nested "
                  f"{measured['nested']['median_us']:.1f} us (p99 {measured['nested']['p99_us']:.1f}), "
                  f"gRPC hop {measured['grpc']['median_us']:.1f} us (p99 {measured['grpc']['p99_us']:.1f})",
                  file=sys.stderr)
        for c in clients:
            c.close()
        nested = [r["nested"]["median_us"] for r in per_round]
        grpc = [r["grpc"]["median_us"] for r in per_round]
        entry = {
            "rounds": per_round,
            "nested_median_us": statistics.median(nested),
            "nested_median_us_interval": list(bootstrap_interval(nested)),
            "nested_p99_us": statistics.median(r["nested"]["p99_us"] for r in per_round),
            "grpc_hop_median_us": statistics.median(grpc),
            "grpc_hop_median_us_interval": list(bootstrap_interval(grpc)),
            "grpc_hop_p99_us": statistics.median(r["grpc"]["p99_us"] for r in per_round),
            "nested_over_grpc": verdict([r["ratio"] for r in per_round], 1.0, False),
        }
        if concurrency == 1:
            entry["target"] = verdict(nested, NESTED_TARGET_US, False)
        results[f"concurrency_{concurrency}"] = entry
    return results


def streaming(grpc_address, http_address, streams, tokens):
    from manypy.client import HttpInferenceClient, InferenceClient
    prompts = [f"prompt {i % 10}" for i in range(streams)]
    reference = {}
    ref_client = InferenceClient(grpc_address, timeout=60)
    for p in sorted(set(prompts)):
        reference[p] = "".join(
            r.as_numpy("text_output")[0].decode() for r in ref_client.generate_stream(
                "char_lm", {"text_input": np.array([p.encode()], dtype=object),
                            "max_tokens": np.array([tokens])}))
    ref_client.close()
    out = {}
    for protocol in ("grpc", "sse"):
        for concurrency in (1, 16):
            clients = [InferenceClient(grpc_address, timeout=60) if protocol == "grpc"
                       else HttpInferenceClient(http_address, timeout=60)
                       for _ in range(concurrency)]
            queue = list(enumerate(prompts))
            lock = threading.Lock()
            first, wrong, responses = [], [], [0]

            def worker(i):
                while True:
                    with lock:
                        if not queue:
                            return
                        n, prompt = queue.pop()
                    start = time.perf_counter()
                    text, got_first = [], None
                    if protocol == "grpc":
                        stream = clients[i].generate_stream(
                            "char_lm", {"text_input": np.array([prompt.encode()], dtype=object),
                                        "max_tokens": np.array([tokens])})
                        pieces = (r.as_numpy("text_output")[0].decode() for r in stream)
                    else:
                        stream = clients[i].generate_stream(
                            "char_lm", {"text_input": prompt, "max_tokens": tokens})
                        pieces = (e["text_output"] for e in stream)
                    for piece in pieces:
                        if got_first is None:
                            got_first = time.perf_counter() - start
                        text.append(piece)
                    with lock:
                        first.append(got_first * 1e3)
                        responses[0] += len(text)
                        if "".join(text) != reference[prompt]:
                            wrong.append(n)

            start = time.perf_counter()
            threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = time.perf_counter() - start
            for c in clients:
                c.close()
            key = f"{protocol}_concurrency_{concurrency}"
            out[key] = {"streams": streams, "tokens_per_stream": tokens,
                        "responses": responses[0], "responses_per_s": responses[0] / wall,
                        "first_response_p50_ms": statistics.median(first),
                        "first_response_p99_ms": percentile(first, 99),
                        "streams_lost_or_reordered": len(wrong), "seconds": wall}
            print(f"[python-native] {key}: {out[key]['responses_per_s']:.0f} responses/s, first "
                  f"response p50 {out[key]['first_response_p50_ms']:.2f} ms, "
                  f"{len(wrong)} streams lost or reordered of {streams}", file=sys.stderr)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--repository", default="build/model-repository")
    p.add_argument("--out", default="bench-results/python_native.json")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=3.0, help="per side per round")
    p.add_argument("--streams", type=int, default=1000)
    p.add_argument("--tokens", type=int, default=16)
    p.add_argument("--interpreters", type=int, default=2)
    args = p.parse_args()
    binary = os.path.join(args.build, "bin", "manypy-server")
    os.environ.setdefault("PYTHONPATH", "")
    sys.path.insert(0, os.path.join(args.build, "python"))
    result = {"interpreters": args.interpreters, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="manypy-bench-native-") as folder:
        package_nested_models(folder)
        proc, ports = start_manypy(binary, folder, ["noop", "nested_caller", "plain_caller"],
                                   args.interpreters)
        try:
            result["nested_calls"] = nested_rounds(f"127.0.0.1:{ports['grpc']}", args.rounds,
                                                   args.seconds)
        finally:
            proc.terminate()
            proc.wait()
    proc, ports = start_manypy(binary, args.repository, ["char_lm"], args.interpreters)
    try:
        result["streaming"] = streaming(f"127.0.0.1:{ports['grpc']}",
                                        f"127.0.0.1:{ports['http']}", args.streams, args.tokens)
    finally:
        proc.terminate()
        proc.wait()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    target = result["nested_calls"]["concurrency_1"]["target"]
    lost = sum(s["streams_lost_or_reordered"] for s in result["streaming"].values())
    print(f"nested call at concurrency 1: median {target['median']:.1f} us, 90% interval "
          f"[{target['interval'][0]:.1f}, {target['interval'][1]:.1f}] (target <= "
          f"{NESTED_TARGET_US:.0f} us): {target['verdict']}; streams lost or reordered: {lost}")
    print(f"wrote {args.out}")
    return 1 if target["verdict"] == "misses" or lost else 0


if __name__ == "__main__":
    sys.exit(main())
