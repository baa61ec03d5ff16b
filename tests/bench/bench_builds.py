#!/usr/bin/python3
"""make bench-builds: two builds of manypy-server side by side, in alternated
rounds of one run, to show that a change made nothing slower.

BEFORE and AFTER are build folders (say, one made from the commit before a
restructuring and one from the working tree). Two scenarios, each with both
servers up at once and the traffic alternating between them round by round
(so a noisy moment on this 2-core machine hits both alike):

  overhead     bench-overhead's server side: small_net (make bench-pool's
               small model, batch 1, 2 interpreters) served over gRPC to
               manypy-perf --async at concurrency 16; per round inferences/s
               and the server's CPU per inference.
  many_models  bench-many-models' on-demand server: 100 models of 8 MiB, a
               budget of about 20, Zipf (s = 1.1) traffic at concurrency 8;
               per round requests/s and warm p50 latency.
  serving, batching, python_native
               the figures of make bench, bench-batching and
               bench-python-native (tests/bench/bench_builds_suites.py says
               which), on the archives of --repository.

--only picks scenarios (comma-separated; all by default, which takes longer
than one exclusive lock should be held: run them a few at a time).

Per scenario and figure, the per-round ratio AFTER / BEFORE: its median with a
bootstrap 90% interval and a verdict against "no slower than 0.95x" (CPU and
latency: "no more than 1.05x"): holds, misses or inconclusive.

    /usr/bin/python3 tests/bench/bench_builds.py --before /tmp/before-build \\
        --after build --out bench-results/builds.json --only serving
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python")]

from bench_common import start_manypy  # noqa: E402
from bench_many_models import Server, Traffic, percentile, zipf_picker  # noqa: E402
from bench_overhead import package_small_net, server_window  # noqa: E402
from paired_rounds import verdict, write_verdicts  # noqa: E402
import bench_builds_suites as suites  # noqa: E402
import many_models  # noqa: E402

SCENARIOS = ("overhead", "many_models", "serving", "batching", "python_native")

NOT_SLOWER = 0.95   # AFTER's throughput at least this share of BEFORE's
NOT_COSTLIER = 1.05  # AFTER's CPU per inference and latency at most this multiple


def binary(build):
    path = os.path.join(build, "bin", "manypy-server")
    if not os.access(path, os.X_OK):
        raise SystemExit(f"{path} is not an executable: build that folder first")
    return path


def overhead(args, folder, perf):
    package_small_net(folder)
    servers = {side: start_manypy(binary(getattr(args, side)), folder, ["small_net"], 2)
               for side in ("before", "after")}
    rows = []
    try:
        for r in range(args.rounds):
            row = {}
            # Alternate which side goes first, so that neither always follows the other.
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                proc, ports = servers[side]
                row[side] = server_window(perf, ports["grpc"], proc.pid, "small_net", 16,
                                          args.overhead_seconds)
            rows.append(row)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait()
    return {
        "rounds": rows,
        "targets": {
            "throughput_after_over_before": verdict(
                [r["after"]["per_s"] / r["before"]["per_s"] for r in rows], NOT_SLOWER, True),
            "cpu_per_inference_after_over_before": verdict(
                [r["after"]["cpu_us"] / r["before"]["cpu_us"] for r in rows], NOT_COSTLIER, False),
        },
    }


def many(args, folder):
    repo = os.path.join(folder, "many")
    archives = many_models.make_models(repo, args.models, 8, 10)
    names = [os.path.splitext(os.path.basename(a))[0] for a in archives]
    budget = int(20 * (os.path.getsize(archives[1]) + 64 * 1024))
    flags = ["--model-control-mode=on-demand", "--interpreters=2", f"--model-memory-budget={budget}"]
    servers = {side: Server(binary(getattr(args, side)), repo, flags,
                            os.path.join(folder, f"{side}.log")) for side in ("before", "after")}
    pick, _ = zipf_picker(names, 1.1)
    rows = []
    try:
        traffic = {side: Traffic(s.port, names, 8) for side, s in servers.items()}
        for r in range(args.rounds):
            row = {}
            for side in (("before", "after") if r % 2 == 0 else ("after", "before")):
                records, errors = traffic[side].run(args.many_seconds, pick)
                ok = [(e - s) * 1000 for _, s, e, good in records if good]
                row[side] = {"requests": len(records), "failed": len(records) - len(ok),
                             "per_s": len(ok) / args.many_seconds, "p50_ms": percentile(ok, 50),
                             "first_errors": errors[:2]}
            rows.append(row)
    finally:
        for s in servers.values():
            s.stop()
    return {
        "budget_bytes": budget,
        "rounds": rows,
        "targets": {
            "throughput_after_over_before": verdict(
                [r["after"]["per_s"] / r["before"]["per_s"] for r in rows], NOT_SLOWER, True),
            "p50_after_over_before": verdict(
                [r["after"]["p50_ms"] / r["before"]["p50_ms"] for r in rows], NOT_COSTLIER, False),
        },
    }


def suite_verdicts(measured):
    """{figure: verdict} of one bench_builds_suites scenario's rounds."""
    out = {}
    for figure, higher_is_better in measured.pop("figures"):
        ratios = [r["after"][figure] / r["before"][figure] for r in measured["rounds"]]
        out[figure] = verdict(ratios, NOT_SLOWER if higher_is_better else NOT_COSTLIER,
                              higher_is_better)
        out[figure]["before_median"] = statistics.median(r["before"][figure]
                                                         for r in measured["rounds"])
        out[figure]["after_median"] = statistics.median(r["after"][figure]
                                                        for r in measured["rounds"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", required=True, help="build folder of the baseline")
    p.add_argument("--after", default="build", help="build folder of the change")
    p.add_argument("--out", default="bench-results/builds.json")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--overhead-seconds", type=float, default=3.0)
    p.add_argument("--many-seconds", type=float, default=15.0)
    p.add_argument("--models", type=int, default=100)
    p.add_argument("--only", default=",".join(SCENARIOS),
                   help=f"comma-separated scenarios of: {', '.join(SCENARIOS)}")
    p.add_argument("--repository", default=None,
                   help="archives for serving, batching and python_native (default: "
                        "AFTER's model-repository, else BEFORE's)")
    p.add_argument("--window-scale", type=float, default=1.0,
                   help="multiplies those scenarios' windows (0.3 for a quick smoke run)")
    p.add_argument("--serving-models", default="",
                   help="comma-separated: only these models of the serving scenario")
    p.add_argument("--streams", type=int, default=40,
                   help="char_lm streams per protocol and concurrency, per side and round")
    args = p.parse_args()
    only = args.only.split(",")
    unknown = set(only) - set(SCENARIOS)
    if unknown:
        p.error(f"--only: unknown scenario(s) {', '.join(sorted(unknown))}")
    repository = args.repository or next(
        (r for r in (os.path.join(args.after, "model-repository"),
                     os.path.join(args.before, "model-repository")) if os.path.isdir(r)), None)
    binaries = {side: binary(getattr(args, side)) for side in suites.SIDES}
    perf = os.path.join(args.after, "bin", "manypy-perf")
    sys.path.insert(0, os.path.join(args.after, "python"))
    result = {"cpus": os.cpu_count(), "load_average": os.getloadavg(),
              "before": os.path.abspath(args.before),
              "after": os.path.abspath(args.after), "rounds": args.rounds,
              "note": "per-round ratios AFTER / BEFORE, both servers up at once, sides alternated"}
    targets = []
    with tempfile.TemporaryDirectory(prefix="manypy-bench-builds-") as folder:
        started = time.monotonic()
        if "overhead" in only:
            result["overhead"] = overhead(args, folder, perf)
            for ratio, v in result["overhead"].pop("targets").items():
                targets.append(dict(v, model="small_net (bench-overhead's server)", ratio=ratio))
        if "many_models" in only:
            result["many_models"] = many(args, folder)
            for ratio, v in result["many_models"].pop("targets").items():
                targets.append(dict(v, model=f"{args.models} models on demand (bench-many-models)", ratio=ratio))
        runs = {"serving": lambda: suites.serving(binaries, repository, perf, args.rounds,
                                                  args.window_scale,
                                                  [m for m in args.serving_models.split(",") if m]),
                "batching": lambda: suites.batching(binaries, repository, perf, args.rounds,
                                                    args.window_scale),
                "python_native": lambda: suites.python_native(binaries, repository, folder,
                                                              args.rounds, args.window_scale,
                                                              args.streams)}
        for name in (n for n in SCENARIOS if n in runs and n in only):
            if repository is None:
                raise SystemExit(f"{name} needs --repository (make models in AFTER or BEFORE)")
            result[name] = runs[name]()
            for figure, v in suite_verdicts(result[name]).items():
                targets.append(dict(v, model=f"{name}: {figure}", ratio="after_over_before"))
            if result[name].get("streams_lost_or_reordered"):
                targets.append({"model": f"{name}: char_lm streams lost or reordered",
                                "ratio": "count", "median": result[name]["streams_lost_or_reordered"],
                                "target": 0, "higher_is_better": False, "verdict": "misses"})
        result["seconds"] = round(time.monotonic() - started)
        result["load_average_after"] = os.getloadavg()
    result["targets"] = targets
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    missed = write_verdicts(result, args.out)
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
