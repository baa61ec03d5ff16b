#!/usr/bin/python3
"""make bench-many-models: a hundred models on one server under a memory
budget that holds about twenty, Zipf traffic over gRPC.

The benchmark packages 100 distinct models (tests/bench/many_models.py: a
linear layer of about 8 MiB of weights each, every tenth with a Python module
of its own), starts manypy-server --model-control-mode=on-demand with a
--model-memory-budget of about 20 of them, and sends Zipf-distributed traffic
(s = 1.1 over the 100, ranks shuffled with a fixed seed) at concurrency 8
from gRPC clients, in rounds alternated with the baseline: the same clients
on a second server with one model loaded (warm latency). Both servers stay
up the whole time (the idle one costs no CPU), so the many-models server
keeps its cache across rounds.

Recorded: requests, failed requests, hit rate (requests answered without
waiting for a load), cold starts (the request that started a load: load
plus first answer) p50/p99, and the same for ten requests one at a time
with no other load queued, warm p50/p99 and their ratio to the single-model
server's per round (median, bootstrap 90% interval, verdict), evictions,
peak resident size (VmHWM) against the server's resident size with no model
loaded (after it has served two models for 5 s and unloaded them; the size
right after start is recorded beside it) + the budget, and, as the other baseline, the resident size of one
Python worker process per model (tests/bench/memory_worker.py) measured for
10 models at once and extrapolated to 100 (labelled so).

A request is cold when a load of its model ended while it waited: the server
logs each on-demand load (JSON log, its end time and duration); the earliest
such request of a load is its cold start.

    /usr/bin/python3 tests/bench/bench_many_models.py --build build --out bench-results/many_models.json
"""
import argparse
import bisect
import datetime
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python")]

from bench_common import no_supervisor, status_bytes  # noqa: E402
from paired_rounds import verdict  # noqa: E402
import many_models  # noqa: E402

WARM_RATIO_TARGET = 1.1     # warm p50 within 1.1x the single-model server's
COLD_P50_TARGET_MS = 300.0  # cold start of an 8 MB model
PEAK_RSS_FACTOR = 1.1       # peak RSS <= idle RSS + budget x 1.1


def percentile(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


class Server:
    """manypy-server with a JSON log on a file, on kernel-picked ports."""

    def __init__(self, binary, repository, extra, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        args = [binary, f"--model-repository={repository}", "--grpc-address=127.0.0.1",
                "--grpc-port=0", "--http-port=0", "--no-metrics", "--log-format=json",
                *no_supervisor(binary),  # its RSS is read from /proc/PID
                *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        for line in self.proc.stdout:
            found = re.search(r"manypy-server: listening on [^:]+:(\d+)", line)
            if found:
                self.port = int(found.group(1))
                return
        raise SystemExit(f"manypy-server {' '.join(extra)} did not start (log: {log_path})")

    def rss(self):
        return status_bytes(self.proc.pid, "VmRSS")

    def peak_rss(self):
        return status_bytes(self.proc.pid, "VmHWM")

    def rss_parts(self):
        """The resident size by kind: the archives' sealed in-memory copies
        (shmem: the weights), the libraries' and files' pages, and the rest
        (anon: the heaps, Python's included)."""
        return {kind: status_bytes(self.proc.pid, "Rss" + kind.capitalize())
                for kind in ("anon", "file", "shmem")}

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()

    def events(self, needle):
        out = []
        for line in open(self.log_path):
            if needle in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
        return out


def cold_loads(server):
    """[(model, end_time, seconds)] of the on-demand loads the server logged."""
    out = []
    for e in server.events("loaded on demand (cold start)"):
        found = re.match(r"model (\S+) version \d+ loaded on demand \(cold start\) in (\d+) ms",
                         e["msg"])
        if not found:
            continue
        end = datetime.datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
        out.append((found.group(1), end, int(found.group(2)) / 1000))
    return out


class Traffic:
    """`concurrency` client threads, each with its own gRPC channel, sending
    one prebuilt request per model; records (model, start, end, ok)."""

    def __init__(self, port, models, concurrency):
        import grpc
        from manypy_proto import grpc_service_pb2 as pb
        from manypy_proto import grpc_service_pb2_grpc as pbg
        import numpy as np
        raw = np.ones((1, many_models.IN_FEATURES), dtype=np.float32).tobytes()
        self.requests = {}
        for m in models:
            r = pb.ModelInferRequest(model_name=m)
            r.inputs.add(name="INPUT__0", datatype="FP32", shape=[1, many_models.IN_FEATURES])
            r.raw_input_contents.append(raw)
            self.requests[m] = r
        self.stubs = [pbg.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
                      for _ in range(concurrency)]
        self.grpc = grpc

    def run_one(self, model):
        """One request to `model` from the first client: ([record], errors)."""
        start = time.time()
        try:
            self.stubs[0].ModelInfer(self.requests[model], timeout=60)
            return [(model, start, time.time(), True)], []
        except self.grpc.RpcError as e:
            return [(model, start, time.time(), False)], [f"{model}: {e.code()} {e.details()}"]

    def run(self, seconds, pick):
        """Runs for `seconds`; pick(rng) names each request's model."""
        out, lock, stop = [], threading.Lock(), time.monotonic() + seconds
        errors = []

        def loop(i):
            rng = random.Random(1000 + i + int(time.time()))
            stub, mine = self.stubs[i], []
            while time.monotonic() < stop:
                m = pick(rng)
                start = time.time()
                try:
                    stub.ModelInfer(self.requests[m], timeout=60)
                    ok = True
                except self.grpc.RpcError as e:
                    ok = False
                    if len(errors) < 5:
                        errors.append(f"{m}: {e.code()} {e.details()}")
                mine.append((m, start, time.time(), ok))
            with lock:
                out.extend(mine)

        threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(self.stubs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return out, errors


def unload_all(port):
    """Unloads every loaded model of the server on `port`."""
    import grpc
    from manypy_proto import grpc_service_pb2 as pb
    from manypy_proto import grpc_service_pb2_grpc as pbg
    stub = pbg.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    for m in stub.RepositoryIndex(pb.RepositoryIndexRequest()).models:
        if m.state == "READY":
            stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=m.name))


def zipf_picker(models, s, seed=7):
    ranked = list(models)
    random.Random(seed).shuffle(ranked)  # which model has which rank
    weights = [1 / (k ** s) for k in range(1, len(ranked) + 1)]
    total = sum(weights)
    cumulative, acc = [], 0.0
    for w in weights:
        acc += w / total
        cumulative.append(acc)

    def pick(rng):
        return ranked[min(len(ranked) - 1, bisect.bisect_left(cumulative, rng.random()))]
    return pick, ranked


def classify(records, loads):
    """Splits `records` into warm and cold latencies (ms) and the cold starts:
    a request is cold when a load of its model ended while it waited."""
    by_model = {}
    for model, end, seconds in loads:
        by_model.setdefault(model, []).append(end)
    warm, cold, starts = [], [], []
    first_of_load = {}
    for i, (m, start, end, ok) in enumerate(records):
        if not ok:
            continue
        ends = by_model.get(m, [])
        j = bisect.bisect_left(ends, start)
        # The log's clock has millisecond resolution: 2 ms of slack.
        waited = j < len(ends) and ends[j] <= end + 0.002
        ms = (end - start) * 1000
        if waited:
            cold.append(ms)
            key = (m, j)
            if key not in first_of_load or start < records[first_of_load[key]][1]:
                first_of_load[key] = i
        else:
            warm.append(ms)
    starts = [(records[i][2] - records[i][1]) * 1000 for i in first_of_load.values()]
    return warm, cold, starts


def process_baseline(archives, count):
    """RSS of `count` Python worker processes, one model each, alive at once."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    workers = [subprocess.Popen(["/usr/bin/python3", os.path.join(HERE, "memory_worker.py"), a,
                                 f"1,{many_models.IN_FEATURES}"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
               for a in archives[:count]]
    rss = []
    for w in workers:
        for line in w.stdout:
            if line.startswith("rss "):
                rss.append(int(line.split()[1]))
                break
    for w in workers:
        w.stdin.close()
        w.wait()
    if len(rss) != count:
        raise SystemExit("a worker process failed to load its model")
    return rss


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--out", default="bench-results/many_models.json")
    p.add_argument("--models", type=int, default=100)
    p.add_argument("--mb", type=float, default=8)
    p.add_argument("--own-every", type=int, default=10)
    p.add_argument("--budget-models", type=float, default=20,
                   help="the budget, in models of the measured size")
    p.add_argument("--zipf", type=float, default=1.1)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--seconds", type=float, default=30, help="Zipf traffic per round")
    p.add_argument("--baseline-seconds", type=float, default=8, help="single model per round")
    p.add_argument("--interpreters", type=int, default=2)
    p.add_argument("--keep-logs", default="", help="copy the servers' logs into this folder")
    args = p.parse_args()
    binary = os.path.join(args.build, "bin", "manypy-server")
    sys.path.insert(0, os.path.join(args.build, "python"))
    result = {"cpus": os.cpu_count(), "interpreters": args.interpreters,
              "models": args.models, "model_weights_mib": args.mb, "own_module_every": args.own_every,
              "zipf_s": args.zipf, "concurrency": args.concurrency, "protocol": "grpc",
              "rounds": args.rounds, "seconds_per_round": args.seconds}
    with tempfile.TemporaryDirectory(prefix="manypy-bench-many-") as folder:
        repo = os.path.join(folder, "repository")
        t0 = time.monotonic()
        archives = many_models.make_models(repo, args.models, args.mb, args.own_every)
        result["packaging_seconds"] = round(time.monotonic() - t0, 1)
        names = [os.path.splitext(os.path.basename(a))[0] for a in archives]
        budget = int(args.budget_models * (os.path.getsize(archives[1]) + 64 * 1024))
        result["budget_bytes"] = budget
        result["budget_note"] = (f"{args.budget_models:g} x (archive size + 64 KiB): about "
                                 f"{args.budget_models:g} plain models, fewer when own-module "
                                 "models (several MiB of Python objects each) are among them")
        many = Server(binary, repo, ["--model-control-mode=on-demand",
                                     f"--interpreters={args.interpreters}",
                                     f"--model-memory-budget={budget}"],
                      os.path.join(folder, "many.log"))
        time.sleep(1)
        start_rss, start_parts = many.rss(), many.rss_parts()
        # The server with no model loaded, after it has served: one plain and
        # one own-module model for a few seconds from the benchmark's
        # clients, then unloaded. What the first requests add for good (code
        # pages, worker threads' allocator caches, gRPC's connection buffers)
        # is part of the server, not of the models the budget counts.
        warm_up = Traffic(many.port, names[:2], args.concurrency)
        warm_up.run(5, lambda rng: rng.choice(names[:2]))
        unload_all(many.port)
        time.sleep(2)
        idle_rss, idle_parts = many.rss(), many.rss_parts()
        single = Server(binary, repo, ["--model-control-mode=explicit",
                                       f"--interpreters={args.interpreters}",
                                       f"--load-model={names[1]}"],
                        os.path.join(folder, "single.log"))
        try:
            pick, ranked = zipf_picker(names, args.zipf)
            many_traffic = Traffic(many.port, names, args.concurrency)
            single_traffic = Traffic(single.port, [names[1]], args.concurrency)
            all_records, errors, rounds = [], [], []
            rss_samples, rss_parts = [], []
            for r in range(args.rounds):
                records, errs = many_traffic.run(args.seconds, pick)
                rss_samples.append(many.rss())
                rss_parts.append(many.rss_parts())
                base, base_errs = single_traffic.run(args.baseline_seconds, lambda rng: names[1])
                all_records.extend(records)
                errors.extend(errs + base_errs)
                rounds.append((records, base))
            # Cold starts with no other load queued: one client, one request
            # each to ten of the least requested models, which the traffic
            # has evicted (checked against the log below), half a second apart.
            time.sleep(1)
            isolated = []
            for m in ranked[-10:]:
                records, errs = many_traffic.run_one(m)
                isolated.extend(records)
                errors.extend(errs)
                time.sleep(0.5)
            loads = cold_loads(many)
            warm_ratios, round_rows = [], []
            for records, base in rounds:
                warm, cold, starts = classify(records, loads)
                base_ms = [(e - s) * 1000 for _, s, e, ok in base if ok]
                row = {"requests": len(records), "warm_p50_ms": percentile(warm, 50),
                       "single_model_p50_ms": percentile(base_ms, 50),
                       "single_model_requests": len(base_ms)}
                if warm and base_ms:
                    row["warm_ratio"] = row["warm_p50_ms"] / row["single_model_p50_ms"]
                    warm_ratios.append(row["warm_ratio"])
                round_rows.append(row)
            _, _, isolated_starts = classify(isolated, loads)
            warm, cold, starts = classify(all_records, loads)
            base_all = [(e - s) * 1000 for _, b in rounds for _, s, e, ok in b if ok]
            failed = sum(1 for *_, ok in all_records + isolated if not ok) + sum(
                1 for _, b in rounds for *_, ok in b if not ok)
            peak = many.peak_rss()
            evictions = len(many.events("evicted (least recently used"))
            result.update({
                "requests": len(all_records),
                "failed_requests": failed,
                "first_errors": errors[:5],
                "hit_rate": len(warm) / max(1, len(warm) + len(cold)),
                "cold_starts": len(starts),
                "cold_start_p50_ms": percentile(starts, 50),
                "cold_start_p99_ms": percentile(starts, 99),
                "cold_start_load_p50_ms": percentile([s * 1000 for _, _, s in loads], 50),
                "isolated_cold_starts": len(isolated_starts),
                "isolated_cold_start_p50_ms": percentile(isolated_starts, 50),
                "isolated_cold_start_max_ms": max(isolated_starts) if isolated_starts else None,
                "isolated_note": "one request at a time to a model the traffic evicted, no other "
                                 "load queued: the load of an 8 MB model plus its first answer",
                "waited_for_a_load_p50_ms": percentile(cold, 50),
                "warm_p50_ms": percentile(warm, 50),
                "warm_p99_ms": percentile(warm, 99),
                "single_model_warm_p50_ms": percentile(base_all, 50),
                "single_model_warm_p99_ms": percentile(base_all, 99),
                "warm_p50_ratio": verdict(warm_ratios, WARM_RATIO_TARGET, higher_is_better=False),
                "evictions": evictions,
                "idle_rss_bytes": idle_rss,
                "idle_rss_note": "no model loaded, after 5 s of traffic to two models (one with "
                                 "a module of its own) and their unload",
                "start_rss_bytes": start_rss,
                "peak_rss_over_start_limit_bytes": int(start_rss + budget * PEAK_RSS_FACTOR),
                "peak_rss_bytes": peak,
                "rss_after_each_round_bytes": rss_samples,
                # Where the resident size is: the weights are the shmem part
                # (it follows the budget's weights), what the measure misses
                # shows in the anon part's growth over idle.
                "rss_parts_bytes": {"start": start_parts, "idle": idle_parts,
                                    "after_each_round": rss_parts},
                "peak_rss_limit_bytes": int(idle_rss + budget * PEAK_RSS_FACTOR),
                "distinct_models_requested": len({m for m, *_ in all_records}),
                "per_round": round_rows,
            })
            if args.keep_logs:
                os.makedirs(args.keep_logs, exist_ok=True)
                for n in ("many.log", "single.log"):
                    subprocess.run(["cp", os.path.join(folder, n), args.keep_logs])
        finally:
            many.stop()
            single.stop()
        rss10 = process_baseline(archives, 10)
        result["python_processes_baseline"] = {
            "measured_processes": 10,
            "measured_rss_bytes": sum(rss10),
            "rss_per_process_median_bytes": statistics.median(rss10),
            "extrapolated_100_processes_rss_bytes": int(statistics.median(rss10) * 100),
            "note": "one Python worker per model (memory_worker.py: torch + torch.package, the "
                    "weights in its own memory), 10 measured alive at once; the 100 are "
                    "extrapolated (median x 100), not measured",
        }
    result["targets"] = {
        "failed_requests": {"target": 0, "measured": result["failed_requests"],
                            "verdict": "holds" if result["failed_requests"] == 0 else "misses"},
        "peak_rss": {"target": "<= idle RSS + budget x 1.1", "limit_bytes": result["peak_rss_limit_bytes"],
                     "measured_bytes": result["peak_rss_bytes"],
                     "verdict": "holds" if result["peak_rss_bytes"] <= result["peak_rss_limit_bytes"] else "misses"},
        "warm_p50": {"target": f"<= {WARM_RATIO_TARGET}x the single-model server",
                     "verdict": result["warm_p50_ratio"]["verdict"]},
        "cold_start_p50": {"target_ms": COLD_P50_TARGET_MS, "measured_ms": result["cold_start_p50_ms"],
                           "verdict": "holds" if (result["cold_start_p50_ms"] or 1e9) <= COLD_P50_TARGET_MS
                           else "misses"},
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: result[k] for k in ("requests", "failed_requests", "hit_rate",
                                             "cold_start_p50_ms", "cold_start_p99_ms",
                                             "warm_p50_ms", "warm_p99_ms",
                                             "single_model_warm_p50_ms", "evictions",
                                             "idle_rss_bytes", "peak_rss_bytes", "budget_bytes")},
                     indent=1))
    print(json.dumps(result["targets"], indent=1))


if __name__ == "__main__":
    main()
