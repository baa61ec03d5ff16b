"""bench_builds.py's scenarios for the figures of `make bench`,
`bench-batching` and `bench-python-native`: the same models, protocols and
concurrencies, each measured on a BEFORE and an AFTER server up at once, in
alternated rounds (round r: before then after, round r + 1: after then
before), so that each round gives one AFTER / BEFORE ratio per figure.

Each scenario returns {"rounds": [per round {side: {figure: value}}],
"figures": [(figure, higher_is_better)]}; bench_builds.py turns every figure
into a verdict (no slower than 0.95x, no costlier than 1.05x).

  serving        make bench's manypy server (bench_serving.py's manypy side,
                 one interpreter per core): mlp_loop at concurrency 1, 16
                 and 64, text_classifier at 16, resnet18 at 4: inferences/s,
                 p50, and the server's CPU per inference; and the server's
                 peak RSS after the rounds (reported, one value a side).
                 resnet50 and vit_small are left out: their figures are the
                 models' own compute, not the request path's, and their
                 windows would take most of the 8 minutes.
  batching       bench_batching.py's cases (mlp_loop at 64 and 1, resnet18
                 at 16 and 1), with dynamic batching on and off: four
                 servers, inferences/s and p50 each.
  python_native  bench_python_native.py's two parts: a nested manypy.infer
                 call's median (timed inside the model) and the client's
                 gRPC hop at concurrency 1 and 16; char_lm streaming over
                 gRPC and server-sent events at concurrency 1 and 16
                 (responses/s, first response p50), every stream checked
                 against the first answer for its prompt (lost or reordered
                 streams are counted, and any fails the run).
"""
import os
import statistics
import time

import numpy as np

from bench_common import cpu_seconds, perf_window, start_manypy, status_bytes

SIDES = ("before", "after")

SERVING_CASES = [("mlp_loop", 1, 1.0), ("mlp_loop", 16, 1.5), ("mlp_loop", 64, 2.0),
                 ("text_classifier", 16, 1.5), ("resnet18", 4, 3.0)]
BATCHING_CASES = [("mlp_loop", 64, 1.0), ("mlp_loop", 1, 1.0), ("resnet18", 16, 3.0),
                  ("resnet18", 1, 3.0)]


def side_order(r):
    return SIDES if r % 2 == 0 else tuple(reversed(SIDES))


def stop(servers):
    for proc, _ in servers.values():
        proc.terminate()
        proc.wait(timeout=60)


def serving(binaries, repository, perf, rounds, scale, only_models=None):
    cases = [c for c in SERVING_CASES if not only_models or c[0] in only_models]
    models = sorted({m for m, _, _ in cases})
    servers = {}
    try:
        for side in SIDES:
            servers[side] = start_manypy(binaries[side], repository, models,
                                         len(os.sched_getaffinity(0)))
        for side in SIDES:  # warm: the first calls of a model are slower
            for model, concurrency, _ in cases:
                perf_window(perf, servers[side][1]["grpc"], model, concurrency, 0.5)
        rows = []
        for r in range(rounds):
            row = {side: {} for side in SIDES}
            for model, concurrency, seconds in cases:
                for side in side_order(r):
                    proc, ports = servers[side]
                    before = cpu_seconds(proc.pid)
                    rec = perf_window(perf, ports["grpc"], model, concurrency, seconds * scale,
                                      warmup=0)
                    cpu = cpu_seconds(proc.pid) - before
                    key = f"{model} c={concurrency}"
                    row[side][f"{key} infer/s"] = rec["infer_per_s"]
                    row[side][f"{key} p50 ms"] = rec["p50_ms"]
                    row[side][f"{key} server CPU us/infer"] = cpu / max(1, rec["requests"]) * 1e6
            rows.append(row)
            print(f"[builds] serving round {r + 1}/{rounds} done", flush=True)
        peak = {side: status_bytes(servers[side][0].pid, "VmHWM") for side in SIDES}
    finally:
        stop(servers)
    figures = []
    for model, concurrency, _ in cases:
        key = f"{model} c={concurrency}"
        figures += [(f"{key} infer/s", True), (f"{key} p50 ms", False),
                    (f"{key} server CPU us/infer", False)]
    return {"rounds": rows, "figures": figures, "peak_rss_bytes": peak}


def batching(binaries, repository, perf, rounds, scale):
    models = sorted({m for m, _, _ in BATCHING_CASES})
    servers = {}
    try:
        for side in SIDES:
            for on in (True, False):
                setting = [f"--model-config={m}:dynamic_batching={str(on).lower()}" for m in models]
                servers[(side, on)] = start_manypy(binaries[side], repository, models, 2, setting)
        for key, (_, ports) in servers.items():
            for model, concurrency, _ in BATCHING_CASES:
                perf_window(perf, ports["grpc"], model, concurrency, 0.3)
        rows = []
        for r in range(rounds):
            row = {side: {} for side in SIDES}
            for model, concurrency, seconds in BATCHING_CASES:
                for on in ((True, False) if r % 2 == 0 else (False, True)):
                    for side in side_order(r):
                        rec = perf_window(perf, servers[(side, on)][1]["grpc"], model,
                                          concurrency, seconds * scale)
                        key = f"{model} c={concurrency} batching {'on' if on else 'off'}"
                        row[side][f"{key} infer/s"] = rec["infer_per_s"]
                        row[side][f"{key} p50 ms"] = rec["p50_ms"]
            rows.append(row)
            print(f"[builds] batching round {r + 1}/{rounds} done", flush=True)
    finally:
        stop(servers)
    figures = []
    for model, concurrency, _ in BATCHING_CASES:
        for on in ("on", "off"):
            key = f"{model} c={concurrency} batching {on}"
            figures += [(f"{key} infer/s", True), (f"{key} p50 ms", False)]
    return {"rounds": rows, "figures": figures}


def python_native(binaries, repository, folder, rounds, scale, streams):
    from manypy.client import InferenceClient
    from bench_python_native import package_nested_models, run_clients, streaming

    nested_folder = os.path.join(folder, "nested")
    os.makedirs(nested_folder, exist_ok=True)
    package_nested_models(nested_folder)
    x = {"INPUT__0": np.ones(4, np.float32)}
    servers, stream_servers, clients = {}, {}, {}
    lost = 0
    try:
        for side in SIDES:
            servers[side] = start_manypy(binaries[side], nested_folder,
                                         ["noop", "nested_caller", "plain_caller"], 2)
            stream_servers[side] = start_manypy(binaries[side], repository, ["char_lm"], 2)
            address = f"127.0.0.1:{servers[side][1]['grpc']}"
            clients[side] = [InferenceClient(address, timeout=30) for _ in range(16)]
            for c in clients[side]:
                c.infer("nested_caller", x)
                c.infer("noop", x)
        rows = []
        for r in range(rounds):
            row = {side: {} for side in SIDES}
            for concurrency in (1, 16):
                for side in side_order(r):
                    cs = clients[side]
                    nested = run_clients(concurrency, 1.5 * scale, lambda i: float(
                        cs[i].infer("nested_caller", x).as_numpy("NESTED_S")[0]) * 1e6)

                    def pair(i):
                        cs[i].infer("plain_caller", x)
                        start = time.perf_counter()
                        cs[i].infer("noop", x)
                        return (time.perf_counter() - start) * 1e6
                    hop = run_clients(concurrency, 1.5 * scale, pair)
                    row[side][f"nested call c={concurrency} median us"] = statistics.median(nested)
                    row[side][f"gRPC hop c={concurrency} median us"] = statistics.median(hop)
            for side in side_order(r):
                _, ports = stream_servers[side]
                got = streaming(f"127.0.0.1:{ports['grpc']}", f"127.0.0.1:{ports['http']}",
                                streams, 16)
                for key, s in got.items():
                    row[side][f"char_lm {key} responses/s"] = s["responses_per_s"]
                    row[side][f"char_lm {key} first response p50 ms"] = s["first_response_p50_ms"]
                    lost += s["streams_lost_or_reordered"]
            rows.append(row)
            print(f"[builds] python_native round {r + 1}/{rounds} done", flush=True)
    finally:
        for cs in clients.values():
            for c in cs:
                c.close()
        stop(servers)
        stop(stream_servers)
    figures = []
    for concurrency in (1, 16):
        figures += [(f"nested call c={concurrency} median us", False),
                    (f"gRPC hop c={concurrency} median us", False)]
    for key in ("grpc_concurrency_1", "grpc_concurrency_16", "sse_concurrency_1",
                "sse_concurrency_16"):
        figures += [(f"char_lm {key} responses/s", True),
                    (f"char_lm {key} first response p50 ms", False)]
    return {"rounds": rows, "figures": figures, "streams_lost_or_reordered": lost,
            "streams_per_side_per_round": streams * 4}
