#!/usr/bin/python3
"""make bench-extensions: Triton's extensions for local and repeated traffic,
each against its baseline measured in the same run, in alternated rounds.

cache: resnet18 (batch 1, 3x224x224 FP32, over gRPC, concurrency 1) with the
response cache on: a repeated request (the same image every time: answered
from the cache after the first) against a computed one (a new image every
time: always a miss, so it pays the key and the insert on top of the model).
Per round the p50 of each side; over the rounds the ratio's median with a
bootstrap 90% interval and the verdict for the target (<= 0.1x).

shm: an identity model (packaged here, FP32 [-1] in and out) over gRPC at
concurrency 1, the same tensor (4 MB and 64 MB) both ways: in a system
shared-memory region (input and output: the requests carry only the
parameters) against the same bytes in raw_input_contents (and the output in
raw_output_contents). Each side's request message is built once, so the
client's own array-to-bytes copy is in neither; every answer is checked
equal to the input. Per round the p50 and throughput of each side; over the
rounds the speed-up's median (raw p50 / shared-memory p50) with a bootstrap
90% interval and the verdict for the target at 64 MB (>= 3x).

The parts (--parts) write one section each of the JSON.

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
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python")]

import numpy as np  # noqa: E402

from bench_common import start_manypy  # noqa: E402
from paired_rounds import bootstrap_interval, verdict  # noqa: E402

CACHE_TARGET = 0.1  # a repeated request's p50 over a computed one's
SHM_TARGET = 3.0    # raw_input_contents p50 over shared memory's, at 64 MB
SHM_SIZES_MB = (4, 64)


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


def package_identity(folder):
    """An archive of a model that returns its FP32 input: the work is the
    request path's, not the model's."""
    import torch
    import manypy.package
    from identity_model import Identity

    manypy.package.export(Identity(), os.path.join(folder, "identity.mpk"), name="identity",
                          inputs=[("INPUT__0", "FP32", [-1])], outputs=[("OUTPUT__0", "FP32", [-1])],
                          example_inputs=(torch.ones(8),))


def run_shm(args):
    import tempfile
    from multiprocessing import shared_memory
    import grpc
    from manypy.client._proto import grpc_service_pb2 as pb, grpc_service_pb2_grpc as pb_grpc

    repository = tempfile.mkdtemp(prefix="manypy-bench-shm-")
    package_identity(repository)
    biggest = max(SHM_SIZES_MB) << 20
    proc, ports = start_manypy(os.path.join(args.build, "bin", "manypy-server"), repository,
                               ["identity"], args.interpreters,
                               ["--allow-client-shm", f"--max-message-size={2 * biggest + 4096}"])
    regions = []
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}",
                                        options=[("grpc.max_send_message_length", -1),
                                                 ("grpc.max_receive_message_length", -1)])
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        out = {"model": "identity (returns its FP32 input)", "protocol": "grpc", "concurrency": 1,
               "requests_per_side_per_round": args.shm_requests, "sizes": {}}
        rng = np.random.default_rng(2)
        for mb in SHM_SIZES_MB:
            n = (mb << 20) // 4
            data = rng.standard_normal(n, dtype=np.float32)
            shm_in = shared_memory.SharedMemory(create=True, size=n * 4)
            shm_out = shared_memory.SharedMemory(create=True, size=n * 4)
            regions += [shm_in, shm_out]
            np.ndarray(n, np.float32, buffer=shm_in.buf)[:] = data
            result = np.ndarray(n, np.float32, buffer=shm_out.buf)
            for name, region in (("in", shm_in), ("out", shm_out)):
                stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name=name))
                stub.SystemSharedMemoryRegister(pb.SystemSharedMemoryRegisterRequest(
                    name=name, key="/" + region.name, offset=0, byte_size=n * 4))

            raw = pb.ModelInferRequest(model_name="identity")
            raw.inputs.add(name="INPUT__0", datatype="FP32", shape=[n])
            raw.raw_input_contents.append(data.tobytes())
            via_shm = pb.ModelInferRequest(model_name="identity")
            tensor = via_shm.inputs.add(name="INPUT__0", datatype="FP32", shape=[n])
            tensor.parameters["shared_memory_region"].string_param = "in"
            tensor.parameters["shared_memory_byte_size"].int64_param = n * 4
            wanted = via_shm.outputs.add(name="OUTPUT__0")
            wanted.parameters["shared_memory_region"].string_param = "out"
            wanted.parameters["shared_memory_byte_size"].int64_param = n * 4

            def call_raw(i):
                response = stub.ModelInfer(raw, timeout=120)
                if i == 0 and response.raw_output_contents[0] != raw.raw_input_contents[0]:
                    raise SystemExit("the raw answer differs from the input")

            def call_shm(i):
                if i == 0:
                    result[:] = 0
                stub.ModelInfer(via_shm, timeout=120)
                if i == 0 and not np.array_equal(result, data):
                    raise SystemExit("the shared-memory answer differs from the input")

            for i in range(3):  # warm-up: both paths, the allocator and the connection
                call_raw(i)
                call_shm(i)
            rounds = []
            for r in range(args.rounds):
                sides = [("raw", call_raw), ("shm", call_shm)]
                if r % 2:
                    sides.reverse()
                measured = {}
                for side, call in sides:
                    start = time.perf_counter()
                    measured[side] = p50_ms(call, args.shm_requests)
                    measured[side + "_per_s"] = args.shm_requests / (time.perf_counter() - start)
                measured["speedup"] = measured["raw"] / measured["shm"]
                rounds.append(measured)
                print(f"shm {mb} MB round {r + 1}/{args.rounds}: raw p50 {measured['raw']:.2f} ms, "
                      f"shm p50 {measured['shm']:.2f} ms, speed-up {measured['speedup']:.2f}x",
                      flush=True)
            size = {"bytes": n * 4, "rounds": rounds}
            for side in ("raw", "shm"):
                for key, unit in ((side, "p50_ms"), (side + "_per_s", "per_s")):
                    values = [r[key] for r in rounds]
                    size[f"{side}_{unit}"] = {"median": statistics.median(values),
                                              "interval": list(bootstrap_interval(values))}
            speedups = [r["speedup"] for r in rounds]
            if mb == max(SHM_SIZES_MB):
                size["raw_over_shm_p50"] = verdict(speedups, SHM_TARGET, higher_is_better=True)
            else:  # no target at 4 MB: reported with its interval
                size["raw_over_shm_p50_no_target"] = {
                    "median": statistics.median(speedups), "interval": list(bootstrap_interval(speedups))}
            out["sizes"][f"{mb}MB"] = size
            stub.SystemSharedMemoryUnregister(pb.SystemSharedMemoryUnregisterRequest(name=""))
        out["raw_over_shm_p50_64MB"] = out["sizes"][f"{max(SHM_SIZES_MB)}MB"]["raw_over_shm_p50"]
        channel.close()
    finally:
        for region in regions:
            region.close()
            region.unlink()
        proc.terminate()
        proc.wait(timeout=60)
    return out


PARTS = {"cache": run_cache, "shm": run_shm}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--repository", default="build/model-repository")
    ap.add_argument("--out", default="bench-results/extensions.json")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated: " + ", ".join(PARTS))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--requests", type=int, default=40, help="per side per round")
    ap.add_argument("--shm-requests", type=int, default=15, help="per side per round and size")
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
