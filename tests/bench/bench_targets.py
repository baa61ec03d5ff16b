#!/usr/bin/python3
"""The ratio targets of make bench, bench-batching, bench-pool,
bench-memory and bench-generate, each judged from paired rounds (tests/bench/paired_rounds.py):
the two sides were measured in alternated rounds, each round gives one
ratio, and the verdict is the median ratio's bootstrap 90% interval against
the target: "holds", "misses" or "inconclusive".

    /usr/bin/python3 tests/bench/bench_targets.py --results bench-results [--only pool,memory]

prints every target the JSON files there allow and exits 1 only if one
misses. bench_report.py puts the same rows in report.md; bench_batching.py
prints its own. A target whose sides were measured in fewer than MIN_ROUNDS
rounds (an older JSON file) is inconclusive, never judged on one sample.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired_rounds import verdict  # noqa: E402

MIN_ROUNDS = 5
MIB = 2**20

# make bench (serving.json): what each target compares, so that bench_serving
# measures exactly those sides in rounds (serving_round_plan).
OVERHEAD_MODEL, OVERHEAD_CONCURRENCY = "mlp_loop", 16
OVERHEAD_SERVERS = ("manypy", "python-processes", "python-grpc")
TORCHSCRIPT_TARGET_MODELS = ("resnet50", "vit_small")
TORCHSCRIPT_PAIR = ("manypy", "manypy-torchscript")
RSS_MODEL, RSS_PAIR = "resnet50", ("manypy", "python-processes")
# Peak RSS under load is judged where 2 interpreters first run full batches
# (resnet50's max batch is 8): more concurrency only queues inputs (0.6 MB
# each). At c=64 each round's end waits for 64 requests in flight, up to 40 s
# for python-processes on a busy machine: 5 such rounds cost make bench
# minutes it does not have.
RSS_CONCURRENCY = 16


def serving_round_plan(model, concurrency, levels):
    """(servers measured in alternated rounds at this step, whether each
    round's peak RSS is measured on its own). Every other server is measured
    once: no target reads it."""
    servers, rss = set(), False
    if model == OVERHEAD_MODEL and concurrency == OVERHEAD_CONCURRENCY:
        servers |= set(OVERHEAD_SERVERS)
    if model in TORCHSCRIPT_TARGET_MODELS:
        servers |= set(TORCHSCRIPT_PAIR)  # at every level: the peak is over the sweep
    if model == RSS_MODEL and concurrency == RSS_CONCURRENCY:
        servers |= set(RSS_PAIR)
        rss = True
    return servers, rss


def judge(name, measured, ratios, target, higher_is_better, unit="x"):
    """One target's row: {"target", "measured", "unit", "verdict": paired_rounds.verdict
    (+ "why" when it could not be judged)}."""
    if len(ratios) < MIN_ROUNDS:
        v = {"verdict": "inconclusive", "target": target, "higher_is_better": higher_is_better,
             "rounds": len(ratios), "median": None, "interval": None,
             "why": f"{len(ratios)} paired round(s), fewer than the {MIN_ROUNDS} a verdict needs"}
    else:
        v = verdict(ratios, target, higher_is_better)
    return {"target": name, "measured": measured, "unit": unit, "verdict": v}


def fmt(value, digits=2):
    return "n/a" if value is None else f"{value:,.{digits}f}"


def describe(row):
    """'0.97x [0.93, 1.01], 5 rounds' (or why it was not judged)."""
    v, unit = row["verdict"], row["unit"]
    if v.get("why"):
        return v["why"]
    digits = 1 if unit == " MiB" else 2
    low, high = v["interval"]
    return (f"{fmt(v['median'], digits)}{unit} [{fmt(low, digits)}, {fmt(high, digits)}], "
            f"{v['rounds']} rounds")


def _rounds(record, field):
    return [r.get(field) for r in (record or {}).get("rounds", [])]


def paired_ratios(a, b):
    """Round i of a over round i of b, for the rounds both have (and b non-zero)."""
    return [x / y for x, y in zip(a, b) if x is not None and y]


# ---------------------------------------------------------------------------
# make bench: serving.json.

def serving_targets(records):
    by = {(r["model"], r["server"], r["concurrency"]): r for r in records}
    rows = []
    m, c = OVERHEAD_MODEL, OVERHEAD_CONCURRENCY
    mp, proc, grpc = (by.get((m, s, c)) for s in OVERHEAD_SERVERS)
    if mp and proc:
        rows.append(judge(
            f"{m} c={c}: server CPU per inference <= 0.6x python-processes",
            f"{fmt(mp['server_cpu_us_per_infer'], 0)} vs {fmt(proc['server_cpu_us_per_infer'], 0)} us",
            paired_ratios(_rounds(mp, "server_cpu_us_per_infer"),
                          _rounds(proc, "server_cpu_us_per_infer")), 0.6, False))
        rows.append(judge(
            f"{m} c={c}: throughput >= 1.6x python-processes",
            f"{fmt(mp['infer_per_s'], 0)} vs {fmt(proc['infer_per_s'], 0)} infer/s",
            paired_ratios(_rounds(mp, "infer_per_s"), _rounds(proc, "infer_per_s")), 1.6, True))
    if mp and grpc:
        rows.append(judge(
            f"{m} c={c}: throughput >= 3x python-grpc",
            f"{fmt(mp['infer_per_s'], 0)} vs {fmt(grpc['infer_per_s'], 0)} infer/s",
            paired_ratios(_rounds(mp, "infer_per_s"), _rounds(grpc, "infer_per_s")), 3.0, True))
    for model in TORCHSCRIPT_TARGET_MODELS:
        a, b = TORCHSCRIPT_PAIR
        levels = sorted(c for (mm, s, c) in by if mm == model and s == a and (model, b, c) in by)
        if levels:
            # Round i's peak: the best level of round i, for each side.
            peaks = {s: [max(t) for t in zip(*(_rounds(by[(model, s, c)], "infer_per_s")
                                                for c in levels))] for s in (a, b)}
            head = {s: max(by[(model, s, c)]["infer_per_s"] for c in levels) for s in (a, b)}
            rows.append(judge(
                f"{model}: peak throughput over the sweep >= 0.95x {b}",
                f"{fmt(head[a], 1)} vs {fmt(head[b], 1)} infer/s",
                paired_ratios(peaks[a], peaks[b]), 0.95, True))
        one, ts = by.get((model, a, 1)), by.get((model, b, 1))
        if one and ts:
            rows.append(judge(
                f"{model} c=1: p50 within 1.1x {b}",
                f"{fmt(one['p50_ms'])} vs {fmt(ts['p50_ms'])} ms",
                paired_ratios(_rounds(one, "p50_ms"), _rounds(ts, "p50_ms")), 1.1, False))
    c = RSS_CONCURRENCY
    a, b = (by.get((RSS_MODEL, s, c)) for s in RSS_PAIR)
    if a and b:
        # VmHWM over each server's whole life: its records' peaks together.
        sweep = {s: max(r["peak_rss_bytes"] for (mm, ss, _), r in by.items()
                        if mm == RSS_MODEL and ss == s) / MIB for s in RSS_PAIR}
        rows.append(judge(
            f"{RSS_MODEL}, 2 workers: peak RSS under load (c={c}, full batches) <= 0.6x "
            f"{RSS_PAIR[1]}",
            f"whole sweep {sweep[RSS_PAIR[0]]:,.0f} vs {sweep[RSS_PAIR[1]]:,.0f} MiB",
            paired_ratios(_rounds(a, "peak_rss_bytes"), _rounds(b, "peak_rss_bytes")), 0.6, False))
    return rows


# ---------------------------------------------------------------------------
# make bench-memory (and make bench): memory.json.

def memory_targets(records):
    """The pool against worker processes, and what each extra interpreter adds,
    from the rounds manypy-bench-memory measured (rounds_rss_bytes)."""
    rows = []
    sized = [r for r in records if "rss_bytes" in r]
    if not sized:
        return rows
    models = list(dict.fromkeys(r["model"] for r in sized))
    by = {(r["model"], r["mode"], r["workers"]): r for r in sized}
    big = models[0]
    n = max(w for (m, mode, w) in by if m == big and mode == "interpreters")
    pool, procs, one = (by.get(k) for k in ((big, "interpreters", n), (big, "processes", n),
                                            (big, "interpreters", 1)))
    rounds = lambda r: (r or {}).get("rounds_rss_bytes", [])  # noqa: E731
    if pool and procs:
        rows.append(judge(
            f"{big}: {n}-interpreter pool RSS <= 0.5x {n} processes' summed RSS",
            f"{pool['rss_bytes'] / MIB:,.0f} vs {procs['rss_bytes'] / MIB:,.0f} MiB",
            paired_ratios(rounds(pool), rounds(procs)), 0.5, False))
    if pool and one and n > 1 and pool.get("weight_bytes"):
        weight = pool["weight_bytes"]
        growth = [(x - y) / (n - 1) / weight for x, y in zip(rounds(pool), rounds(one))]
        rows.append(judge(
            f"{big}: pool RSS growth per extra interpreter (1 -> {n}) <= 1.0x the weight size",
            f"{(pool['rss_bytes'] - one['rss_bytes']) / (n - 1) / MIB:,.1f} vs "
            f"{weight / MIB:,.1f} MiB", growth, 1.0, False))
    for small in models[1:]:
        sn = max(w for (m, mode, w) in by if m == small and mode == "interpreters")
        top, base = by.get((small, "interpreters", sn)), by.get((small, "interpreters", 1))
        if top and base and sn > 1:
            # Not a ratio: an absolute budget, judged from the same kind of rounds.
            growth = [(x - y) / (sn - 1) / MIB for x, y in zip(rounds(top), rounds(base))]
            rows.append(judge(
                f"{small} (torch only): RSS per extra interpreter (1 -> {sn}) <= 50 MiB",
                f"{(top['rss_bytes'] - base['rss_bytes']) / (sn - 1) / MIB:,.1f} MiB",
                growth, 50.0, False, unit=" MiB"))
    ready = next((r for r in records if r.get("mode") == "server" and r.get("workers") == 2), None)
    if ready:
        rows.append(judge(
            "manypy-server ready with the example repository, 2 interpreters: < 10 s",
            f"{fmt(ready['ready_seconds'])} s ({ready.get('models_ready')} models)",
            ready.get("rounds_ready_seconds", []), 10.0, False, unit=" s"))
    return rows


# ---------------------------------------------------------------------------
# make bench-batching: batching.json.

BATCHING_THROUGHPUT = [("mlp_loop", 64, 2.5), ("resnet18", 16, 1.0)]
BATCHING_P50 = [("mlp_loop", 1, 1.1), ("resnet18", 1, 1.1)]


def batching_targets(records):
    by = {(r["model"], r["concurrency"], r["batching"]): r for r in records}
    rows = []
    for model, c, target in BATCHING_THROUGHPUT:
        on, off = by.get((model, c, True)), by.get((model, c, False))
        if on and off:
            rows.append(judge(
                f"{model} c={c}: throughput with batching >= {target}x without",
                f"{fmt(on['infer_per_s'], 1)} vs {fmt(off['infer_per_s'], 1)} infer/s",
                paired_ratios(_rounds(on, "infer_per_s"), _rounds(off, "infer_per_s")),
                target, True))
    for model, c, target in BATCHING_P50:
        on, off = by.get((model, c, True)), by.get((model, c, False))
        if on and off:
            rows.append(judge(
                f"{model} c={c}: p50 with batching within {target}x without",
                f"{fmt(on['p50_ms'])} vs {fmt(off['p50_ms'])} ms",
                paired_ratios(_rounds(on, "p50_ms"), _rounds(off, "p50_ms")), target, False))
    return rows


# ---------------------------------------------------------------------------
# make bench-pool: pool.json (docs/benchmarks-stacks.md's targets, at T=2).

POOL = [  # (model, (mode, threads), (mode, threads), target)
    ("small", ("interpreters", 2), ("interpreters", 1), 1.8),
    ("small", ("interpreters", 2), ("shared_interpreter", 2), 4.0),
    ("resnet18", ("interpreters", 1), ("torchscript", 1), 0.95),
    ("resnet18", ("interpreters", 2), ("torchscript", 2), 0.95),
]


def pool_targets(records):
    by = {(r["model"], r["mode"], r["threads"]): r for r in records}
    rows = []
    for model, (am, at), (bm, bt), target in POOL:
        a, b = by.get((model, am, at)), by.get((model, bm, bt))
        if a and b:
            rows.append(judge(
                f"{model}: {am} T={at} >= {target}x {bm} T={bt} (calls/s)",
                f"{fmt(a['calls_per_s'], 0)} vs {fmt(b['calls_per_s'], 0)} calls/s",
                paired_ratios(a.get("rounds_calls_per_s", []), b.get("rounds_calls_per_s", [])),
                target, True))
    return rows


# ---------------------------------------------------------------------------
# make bench-generate: generate.json (continuous batching, docs/continuous-batching.md).

GENERATE_THROUGHPUT, GENERATE_TTFT = 4.0, 2.0
# Judged on the C++ load generator's sides (manypy-perf --streaming), as
# Triton's targets are on perf_analyzer's: the clients share the server's 2
# cores, and the Python gRPC client spends about as much CPU per token as the
# batched server, so its ratios measure the client too (docs/benchmarks.md).
# The Python client's ratios are reported beside, not judged.
GENERATE_JUDGED = ("batched_cpp", "unbatched_cpp", "C++ client (manypy-perf)")
GENERATE_REPORTED = ("batched", "unbatched", "Python gRPC client")


def reported(name, measured, ratios, target, higher_is_better):
    """A row shown beside the targets and never judged ("reported")."""
    row = judge(name, measured, ratios, target, higher_is_better)
    row["verdict"]["verdict"] = "reported"
    return row


def generate_targets(result):
    levels = result.get("levels", {})
    one, sixteen = levels.get("1"), levels.get("16")
    if not one or not sixteen:
        return []
    rounds16, rounds1 = sixteen["rounds"], one["rounds"]
    rows = []
    for (batched, unbatched, client), row in ((GENERATE_JUDGED, judge),
                                              (GENERATE_REPORTED, reported)):
        if f"{batched}_tokens_per_s" not in sixteen:
            continue  # a result from before the C++ client's sides
        rows += [
            row(f"llama_decoder 16 streams, {client}: tokens/s with continuous batching >= "
                f"{GENERATE_THROUGHPUT}x without",
                f"{fmt(sixteen[f'{batched}_tokens_per_s'], 0)} vs "
                f"{fmt(sixteen[f'{unbatched}_tokens_per_s'], 0)} tokens/s",
                paired_ratios([r[batched]["tokens_per_s"] for r in rounds16],
                              [r[unbatched]["tokens_per_s"] for r in rounds16]),
                GENERATE_THROUGHPUT, True),
            row(f"llama_decoder with continuous batching, {client}: TTFT p50 at 16 streams <= "
                f"{GENERATE_TTFT}x at 1",
                f"{fmt(sixteen[f'{batched}_ttft_p50_ms'])} vs {fmt(one[f'{batched}_ttft_p50_ms'])} ms",
                paired_ratios([r[batched]["ttft_p50_ms"] for r in rounds16],
                              [r[batched]["ttft_p50_ms"] for r in rounds1]),
                GENERATE_TTFT, False)]
    # Every text is checked on the Python gRPC and route sides (the C++
    # client does not check its text; a --cpp-only result ran none of them,
    # so it has no such row).
    checked = [r[side]["lost_or_reordered"] or 0 for level in levels.values()
               for r in level["rounds"] for side in ("batched", "unbatched", "batched_openai")
               if side in r]
    if checked:
        lost = sum(checked)
        rows.append({"target": "llama_decoder: 0 streams lost or reordered", "measured": f"{lost}",
                     "unit": "", "verdict": {"verdict": "holds" if lost == 0 else "misses",
                                             "why": f"{lost} stream(s) lost or reordered"}})
    return rows


# ---------------------------------------------------------------------------

SOURCES = {"serving": ("serving.json", serving_targets), "memory": ("memory.json", memory_targets),
           "batching": ("batching.json", batching_targets), "pool": ("pool.json", pool_targets),
           "generate": ("generate.json", generate_targets)}


def all_targets(folder, only=None):
    """Every target that the JSON files in `folder` allow, in SOURCES' order."""
    rows = []
    for name, (file, judge_all) in SOURCES.items():
        path = os.path.join(folder, file)
        if (only is None or name in only) and os.path.exists(path):
            with open(path) as f:
                rows += judge_all(json.load(f))
    return rows


def any_missed(rows):
    return any(r["verdict"]["verdict"] == "misses" for r in rows)


def print_rows(rows, out=None):
    for r in rows:
        print(f"  {r['verdict']['verdict']:<12} {r['target']}: {r['measured']}; {describe(r)}",
              file=out or sys.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="bench-results")
    parser.add_argument("--only", help="comma-separated: " + ", ".join(SOURCES))
    args = parser.parse_args(argv)
    only = set(args.only.split(",")) if args.only else None
    rows = all_targets(args.results, only)
    if not rows:
        print(f"bench_targets: no targets in {args.results} ({', '.join(sorted(only or SOURCES))})",
              file=sys.stderr)
        return 2
    print_rows(rows)
    return 1 if any_missed(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
