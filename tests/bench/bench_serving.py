#!/usr/bin/python3
"""make bench: manypy against what users would run instead, same models,
same protocol, same cores.

Servers (each serving one model at a time, all started side by side and
measured in turn at each step, so this VM's speed drifts fall on all alike):
  manypy            manypy-server, one interpreter per core
  manypy-torchscript  the same model compiled with torch.jit.script, served by
                    manypy-server on platform torchscript (C++ threads, no
                    interpreter): the in-process limit, for models with tensor inputs
  python-grpc       a grpcio server, thread pool, one Python interpreter
  python-processes  one worker process per core, a model copy each, one port
                    (SO_REUSEPORT): the TorchServe / Triton Python-backend pattern
(tests/bench/python_grpc_server.py has the baselines.) Each step is driven by
manypy-perf over gRPC, one connection per concurrent stream; server CPU is
read from /proc for the server's whole process tree around the measurement
window, peak RSS is the sum of the tree's VmHWM.

Writes a JSON list of {"model", "server", "concurrency", "infer_per_s",
"p50_ms", "p99_ms", "server_cpu_us_per_infer", "peak_rss_bytes"}. The servers
that a target compares at a step (tests/bench/bench_targets.py's
serving_round_plan) are measured there in ROUNDS alternated rounds; their
records are the median round's, with every round's figures in "rounds" (and
"rounds_infer_per_s"), from which bench_targets judges each target.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from bench_common import cpu_seconds, no_supervisor, status_bytes
from bench_targets import serving_round_plan

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODELS = ["mlp_loop", "resnet18", "resnet50", "vit_small", "text_classifier"]
# text_classifier's tokenizer is Python over BYTES inputs: no TorchScript form.
TORCHSCRIPT_MODELS = {"mlp_loop", "resnet18", "resnet50", "vit_small"}
# Seconds per image on one core: windows long enough for tens of samples at c=64.
# (The whole sweep must fit make bench's 20 minutes: each step also waits for
# the requests still in flight when its window closes, seconds at c=64.)
# resnet18's are the shortest for its cost: no target reads it, and the
# targets' rounds need the time.
WINDOW_SCALE = {"mlp_loop": 1.0, "text_classifier": 1.0, "resnet18": 1.0, "resnet50": 2.5,
                "vit_small": 2.0}
LEVELS = [1, 4, 16, 64]
# The targets compare two servers within a few percent (manypy vs
# manypy-torchscript) while this VM's speed moves by +-10% from one window to
# the next. So the sides of each target are measured in ROUNDS alternated
# rounds per step (A B, B A, A B, ...): each round gives one ratio, and
# bench_targets judges the median ratio by its bootstrap interval; a slow
# spell then widens the interval instead of deciding the ratio.
ROUNDS = 5
# Each round's window is this share of the model's: 5 rounds measure each side
# 5/3 as long as one window would, and keep make bench within its 20 minutes.
# At c=64 twice that: 64 requests in flight take resnet50 3.4 s to answer, and
# they come back 8 (a batch) at a time per interpreter, so a count over a
# shorter window moves by a whole batch from round to round.
ROUND_WINDOW_SHARE = {64: 2 / 3}
DEFAULT_ROUND_WINDOW_SHARE = 1 / 3


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree(pid):
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def tree_cpu_seconds(pid):
    """CPU seconds of `pid` and its descendants (a process that ended meanwhile counts 0)."""
    total = 0
    for p in tree(pid):
        try:
            total += cpu_seconds(p)
        except OSError:
            pass
    return total


def peak_rss(pid):
    total = 0
    for p in tree(pid):
        try:
            total += status_bytes(p, "VmHWM")
        except OSError:
            pass
    return total


class Server:
    def __init__(self, kind, args, model):
        self.kind = kind
        self.port = free_port()
        archive = os.path.join(args.repository, model + ".mpk")
        cores = len(os.sched_getaffinity(0))
        # What manypy-perf asks for: the TorchScript archive is <model>_ts.
        self.model = model + "_ts" if kind == "manypy-torchscript" else model
        if kind.startswith("manypy"):
            repository = args.torchscript_repository if kind == "manypy-torchscript" else args.repository
            cmd = [os.path.join(args.build, "bin", "manypy-server"),
                   f"--model-repository={repository}", "--model-control-mode=explicit",
                   f"--load-model={self.model}", "--grpc-address=127.0.0.1",
                   f"--grpc-port={self.port}", "--metrics-port=0", "--http-port=0",
                   "--log-level=warning"]
            cmd += no_supervisor(cmd[0])  # its CPU and memory are read from /proc
        else:
            cmd = ["/usr/bin/python3", os.path.join(HERE, "python_grpc_server.py"), archive,
                   f"--port={self.port}"]
            if kind == "python-processes":
                cmd.append(f"--processes={cores}")
        # The baselines use as many threads as manypy: one per core in all.
        env = dict(os.environ, PYTHONPATH=os.path.join(args.build, "python"))
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, env=env)
        for line in self.proc.stdout:
            if "listening on" in line:
                return
        raise SystemExit(f"{kind} did not start for {model}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def reset_peak_rss(pid):
    """Restarts VmHWM at the current RSS for pid's whole tree (clear_refs 5,
    Linux >= 4.0), so that the next peak_rss is this round's own."""
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


def perf(args, port, model, concurrency, warmup, window, on_measuring):
    """One manypy-perf run: `warmup` seconds, then one window; on_measuring()
    is called when perf says its warm-up is over (one run, so no drain of the
    in-flight requests between warm-up and window, seconds at c=64)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        proc = subprocess.Popen([os.path.join(args.build, "bin", "manypy-perf"), "-m", model,
                                 "-u", f"127.0.0.1:{port}", "--concurrency", str(concurrency),
                                 "--warmup-seconds", str(warmup), "--window-seconds", str(window),
                                 "--max-windows", "1", "--json", out.name, "--csv", os.devnull],
                                stderr=subprocess.PIPE, text=True)
        said = []
        for line in proc.stderr:
            if "warm-up done, measuring" in line:
                on_measuring()
            said = (said + [line.rstrip()])[-5:]
        if proc.wait() != 0:
            raise SystemExit(f"manypy-perf {model} c={concurrency} failed: " + " / ".join(said))
        return json.load(open(out.name))[0]


def measure(args, server, model, concurrency, window_share=1.0, own_peak=False):
    """One window of `server` after args.warmup seconds of the same load; CPU
    (and with own_peak, the peak RSS) from the window's start."""
    at = {}

    def measuring():
        if own_peak:
            reset_peak_rss(server.proc.pid)
        at["cpu"] = tree_cpu_seconds(server.proc.pid)

    record = perf(args, server.port, server.model, concurrency, args.warmup,
                  args.window * window_share * (1.0 if args.quick else WINDOW_SCALE[model]),
                  measuring)
    cpu = tree_cpu_seconds(server.proc.pid) - at["cpu"]
    requests = record.get("requests") or 0
    return {
        "model": model, "server": server.kind, "concurrency": concurrency,
        "infer_per_s": record["infer_per_s"], "p50_ms": record["p50_ms"], "p99_ms": record["p99_ms"],
        "server_cpu_us_per_infer": cpu * 1e6 / requests if requests else None,
        "peak_rss_bytes": peak_rss(server.proc.pid),
        "errors": record.get("errors", 0),
        "errors_by_code": record.get("errors_by_code", {}),
        "error_messages": record.get("error_messages", {}),
    }


ROUND_FIELDS = ("infer_per_s", "p50_ms", "p99_ms", "server_cpu_us_per_infer", "peak_rss_bytes")


def median_round(rounds, peak_before=0):
    """The record of the median round by throughput, with every round's
    figures in "rounds" (in the order measured). peak_before: the VmHWM
    before the rounds reset it, so peak_rss_bytes stays the whole sweep's."""
    ordered = sorted(rounds, key=lambda r: r["infer_per_s"])
    record = dict(ordered[len(ordered) // 2])
    record["rounds"] = [{k: r[k] for k in ROUND_FIELDS} for r in rounds]
    record["rounds_infer_per_s"] = [r["infer_per_s"] for r in rounds]
    record["peak_rss_bytes"] = max([peak_before] + [r["peak_rss_bytes"] for r in rounds])
    if peak_before:
        record["peak_rss_before_rounds_bytes"] = peak_before
    # A failure in any round must still surface, with counts that add up.
    record["errors"] = sum(r["errors"] for r in rounds)
    record["errors_by_code"], record["error_messages"] = {}, {}
    for r in rounds:
        for code, count in r["errors_by_code"].items():
            record["errors_by_code"][code] = record["errors_by_code"].get(code, 0) + count
        for code, message in r["error_messages"].items():
            record["error_messages"].setdefault(code, message)
    return record


def measure_step(args, servers, model, concurrency, levels):
    """One record per server at this step: the servers a target compares here
    in ROUNDS alternated rounds (forward, then backward: each pair's order
    alternates), every other server once."""
    kinds, own_peak = serving_round_plan(model, concurrency, levels)
    paired = [s for s in servers if s.kind in kinds]
    if len(paired) < 2:
        paired = []
    before = {s.kind: peak_rss(s.proc.pid) if own_peak else 0 for s in paired}
    rounds = {s.kind: [] for s in paired}
    for i in range(ROUNDS if paired else 0):
        for server in (paired if i % 2 == 0 else paired[::-1]):
            share = ROUND_WINDOW_SHARE.get(concurrency, DEFAULT_ROUND_WINDOW_SHARE)
            rounds[server.kind].append(measure(args, server, model, concurrency, share, own_peak))
    return [median_round(rounds[s.kind], before[s.kind]) if s.kind in rounds
            else measure(args, s, model, concurrency) for s in servers]


def package_torchscript(model, folder):
    """Writes folder/<model>_ts.mpk from models/<model>.py (kept while up to date)."""
    sys.path.insert(0, os.path.join(REPO, "models"))
    import make_repository
    os.makedirs(folder, exist_ok=True)
    make_repository.package_model(model, folder, torchscript=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--repository", default="build/model-repository")
    parser.add_argument("--torchscript-repository",
                        help="where the <model>_ts.mpk archives are written (default: "
                        "torchscript-repository beside --repository)")
    parser.add_argument("--out", default="bench-results/serving.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: one model, short windows")
    parser.add_argument("--window", type=float, default=3.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    args = parser.parse_args()
    models, levels = MODELS, LEVELS
    if args.quick:  # c=16, so that the smoke run covers mlp_loop's rounds and targets
        models, levels, args.window, args.warmup = ["mlp_loop"], [1, 16], 1.0, 0.5
    if args.torchscript_repository is None:
        args.torchscript_repository = os.path.join(
            os.path.dirname(os.path.abspath(args.repository)), "torchscript-repository")
    results = []
    start = time.monotonic()
    for model in models:
        began = time.monotonic()
        kinds = ["manypy", "python-grpc", "python-processes"]
        if model in TORCHSCRIPT_MODELS:
            package_torchscript(model, args.torchscript_repository)
            kinds.insert(1, "manypy-torchscript")
        servers = []
        try:
            for kind in kinds:
                servers.append(Server(kind, args, model))
            for concurrency in levels:
                for r in measure_step(args, servers, model, concurrency, levels):
                    results.append(r)
                    print(f"{model:<16} {r['server']:<18} c={concurrency:<3} "
                          f"{r['infer_per_s']:9.1f} infer/s  p50 {r['p50_ms']:8.2f} ms  "
                          f"p99 {r['p99_ms']:8.2f} ms  cpu {r['server_cpu_us_per_infer'] or 0:9.0f} us/inf  "
                          f"rss {r['peak_rss_bytes'] / 2**20:7.0f} MiB"
                          + (f"  rounds {r['rounds_infer_per_s']}" if "rounds_infer_per_s" in r
                             else ""), flush=True)
        finally:
            for s in servers:
                s.stop()
        print(f"{model}: {time.monotonic() - began:.0f} s", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.out} ({len(results)} records, {time.monotonic() - start:.0f} s)")
    # A baseline that fails requests under load is a finding (the report shows
    # it); manypy failing any is a bug.
    for r in results:
        if r["errors"]:
            said = "; ".join(f"{code}: {message}" for code, message in r["error_messages"].items())
            print(f"{r['model']} {r['server']} c={r['concurrency']}: {r['errors']} failed "
                  f"request(s){' (first: ' + said + ')' if said else ''}", file=sys.stderr)
    return 1 if any(r["errors"] and r["server"].startswith("manypy") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
