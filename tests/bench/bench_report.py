#!/usr/bin/python3
"""make bench's report: bench-results/report.md and PNG plots from the JSON the
benchmarks wrote in the same run (serving.json required; memory.json,
batching.json and http.json used when present).

    /usr/bin/python3 tests/bench/bench_report.py --results bench-results

Every figure sits beside its baseline from the same run, with the ratio; every
ratio target gets a verdict from paired rounds (tests/bench/bench_targets.py):
holds, misses or inconclusive, with the interval. Exits 1 only if one misses.
Plots (Debian's python3-matplotlib):
serving_throughput.png, serving_latency.png, serving_cpu.png, memory.png.
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_targets import all_targets, any_missed, describe, print_rows  # noqa: E402

SERVERS = ["manypy", "manypy-torchscript", "python-grpc", "python-processes"]
COLORS = {"manypy": "tab:blue", "manypy-torchscript": "tab:cyan", "python-grpc": "tab:red",
          "python-processes": "tab:orange"}


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def machine():
    """What the figures were measured on, in words."""
    cpu = "unknown CPU"
    try:
        found = re.search(r"model name\s*:\s*(.+)", open("/proc/cpuinfo").read())
        cpu = found.group(1).strip() if found else cpu
    except OSError:
        pass
    mem = 0
    try:
        mem = int(re.search(r"MemTotal:\s+(\d+)", open("/proc/meminfo").read()).group(1)) * 1024
    except (OSError, AttributeError):
        pass

    def version(package):
        proc = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                              capture_output=True, text=True)
        return proc.stdout.strip() or "not installed"

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=os.path.dirname(os.path.abspath(__file__)))
    return [
        ("CPU", f"{cpu}, {len(os.sched_getaffinity(0))} cores available"),
        ("memory", f"{mem / 2**30:.1f} GiB"),
        ("kernel", platform.release()),
        ("libtorch (libtorch-dev)", version("libtorch-dev")),
        ("BLAS", f"OpenBLAS OpenMP build {version('libopenblas0-openmp')}"),
        ("malloc", f"manypy-server: tcmalloc {version('libtcmalloc-minimal4')} (linked); "
                   "the Python baselines: glibc's"),
        ("Python", platform.python_version()),
        ("grpcio (baselines)", version("python3-grpcio")),
        ("manypy commit", commit.stdout.strip() or "unknown"),
    ]


def index(records):
    """{(model, server, concurrency): record}."""
    return {(r["model"], r["server"], r["concurrency"]): r for r in records}


def fmt(value, digits=2, unit=""):
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}{unit}"


def serving_tables(by, models):
    out = []
    for model in models:
        servers = [s for s in SERVERS if any(k[0] == model and k[1] == s for k in by)]
        levels = sorted({c for (m, _, c) in by if m == model})
        out.append(f"\n### {model}\n")
        out.append("| c | server | infer/s | vs manypy | p50 ms | p99 ms | server CPU us/infer | "
                   "peak RSS MiB | failed |")
        out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for c in levels:
            base = by.get((model, "manypy", c))
            for s in servers:
                r = by.get((model, s, c))
                if not r:
                    continue
                rel = "1.00x" if s == "manypy" else (
                    f"{base['infer_per_s'] / r['infer_per_s']:.2f}x" if base and r["infer_per_s"]
                    else "n/a")
                if not r["infer_per_s"]:
                    rel = "none finished in the window"
                out.append(f"| {c} | {s} | {fmt(r['infer_per_s'], 1)} | {rel} | "
                           f"{fmt(r['p50_ms'])} | {fmt(r['p99_ms'])} | "
                           f"{fmt(r['server_cpu_us_per_infer'], 0)} | "
                           f"{r['peak_rss_bytes'] / 2**20:,.0f} | {r.get('errors', 0)} |")
    out.append("\n\"vs manypy\" is manypy's throughput divided by that server's: above 1, manypy "
               "serves more.")
    return out


def plot_serving(by, models, folder):
    files = []
    specs = [("serving_throughput.png", "infer_per_s", "inferences / s", False),
             ("serving_latency.png", None, "latency (ms, log)", True),
             ("serving_cpu.png", "server_cpu_us_per_infer", "server CPU per inference (us, log)",
              True)]
    for name, field, label, log in specs:
        fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.8), squeeze=False)
        for ax, model in zip(axes[0], models):
            for s in SERVERS:
                points = sorted((c, r) for (m, srv, c), r in by.items() if m == model and srv == s)
                if not points:
                    continue
                xs = [c for c, _ in points]
                if field is None:  # p50 solid, p99 dashed
                    ax.plot(xs, [r["p50_ms"] for _, r in points], "-o", color=COLORS[s],
                            label=f"{s} p50", markersize=3)
                    ax.plot(xs, [r["p99_ms"] for _, r in points], "--", color=COLORS[s],
                            label=f"{s} p99")
                else:
                    ax.plot(xs, [r[field] or 0 for _, r in points], "-o", color=COLORS[s], label=s,
                            markersize=3)
            ax.set_xscale("log", base=2)
            if log:
                ax.set_yscale("log")
            ax.set_title(model)
            ax.set_xlabel("concurrency")
            ax.set_ylabel(label)
            ax.grid(True, alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(folder, name), dpi=90)
        plt.close(fig)
        files.append(name)
    return files


def memory_section(memory, folder):
    """Lines for memory.json (manypy-bench-memory) and memory.png."""
    if not memory:
        return ["\nNot run: `make bench-memory` (memory.json absent)."], []
    # The first model's pool-vs-processes records; the small model's and the
    # server's time-to-ready records are not part of this plot.
    memory = [r for r in memory if r.get("model") == memory[0].get("model") and "rss_bytes" in r]
    by = {}
    for r in memory:
        by.setdefault(r["mode"], []).append(r)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for mode, rows in sorted(by.items()):
        rows.sort(key=lambda r: r["workers"])
        ax.plot([r["workers"] for r in rows], [r["rss_bytes"] / 2**20 for r in rows], "-o",
                label=mode)
    ax.set_xlabel("workers (interpreters or processes)")
    ax.set_ylabel("resident memory (MiB)")
    ax.set_title(f"{memory[0].get('model', 'resnet50')}: memory vs workers")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, "memory.png"), dpi=90)
    plt.close(fig)
    lines = ["\n| mode | workers | RSS MiB | load s |", "|---|---:|---:|---:|"]
    for mode, rows in sorted(by.items()):
        for r in rows:
            lines.append(f"| {mode} | {r['workers']} | {r['rss_bytes'] / 2**20:,.0f} | "
                         f"{fmt(r.get('load_seconds'))} |")
    return lines, ["memory.png"]


def simple_table(records, keys):
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for r in records:
        lines.append("| " + " | ".join(str(r.get(k, "")) for k in keys) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", default="bench-results")
    parser.add_argument("--smoke", action="store_true",
                        help="exit 0 even if a target misses: the smoke run's windows are too "
                        "short to judge (ctest bench_report_quick checks the report is written)")
    args = parser.parse_args()
    serving = load(args.results, "serving.json")
    if not serving:
        print(f"bench_report: no {args.results}/serving.json; run make bench-serving first",
              file=sys.stderr)
        return 1
    by = index(serving)
    models = list(dict.fromkeys(r["model"] for r in serving))
    plots = plot_serving(by, models, args.results)
    memory_lines, memory_plots = memory_section(load(args.results, "memory.json"), args.results)
    plots += memory_plots

    out = ["# manypy benchmark report", "",
           "Written by `make bench` (tests/bench/bench_report.py) from the JSON files beside it. "
           "Every figure was measured in the same run as its baseline, on the same cores, over "
           "the same protocol (gRPC, one connection per concurrent stream, driven by "
           "manypy-perf); ratios are of figures from that one run.", "", "## Machine", ""]
    out += [f"- {k}: {v}" for k, v in machine()]
    rows = all_targets(args.results)
    out += ["", "## Targets", "",
            "Each target's two sides were measured in alternated rounds (A B, B A, ...); each "
            "round gives one ratio. The verdict is the median ratio's bootstrap 90% interval "
            "against the target: **holds** when the whole interval is on the right side of it, "
            "**misses** when the whole interval is on the wrong side, **inconclusive** when the "
            "interval straddles it (this machine's noise is larger than the margin: the target "
            "is neither met nor missed by this run). Only a miss fails `make bench`.", "",
            "| target | measured (median round) | median ratio [90% interval], rounds | verdict |",
            "|---|---|---|---|"]
    out += [f"| {r['target']} | {r['measured']} | {describe(r)} | **{r['verdict']['verdict']}** |"
            for r in rows]
    counts = {k: sum(r["verdict"]["verdict"] == k for r in rows)
              for k in ("holds", "misses", "inconclusive", "reported")}
    out += ["", f"{counts['holds']} hold, {counts['misses']} miss, "
                f"{counts['inconclusive']} inconclusive"
                + (f"; {counts['reported']} reported beside them, not judged." if counts["reported"]
                   else ".")]
    out += ["", "## Serving: manypy and what users would run instead", "",
            "- manypy: manypy-server, one interpreter per core, the Python archive.",
            "- manypy-torchscript: the same model compiled with torch.jit.script, served by "
            "manypy-server on platform torchscript (C++ threads, no interpreter).",
            "- python-grpc: a grpcio server with a thread pool and one Python interpreter "
            "(tests/bench/python_grpc_server.py).",
            "- python-processes: one worker process per core, each with its own model copy, "
            "behind one port (SO_REUSEPORT).",
            "", "Models: mlp_loop (100 tiny layers in a Python loop: overhead-bound), resnet18, "
            "resnet50, vit_small (a 6-layer ViT-S/16), text_classifier (Python tokenizer over "
            "strings: no TorchScript form). manypy batches the models whose manifests ask for "
            "it (all of these); the Python baselines run each request alone, as a first server "
            "would: the figures compare what users get, not identical work.", ""]
    paired = sorted({f"{r['model']} c={r['concurrency']}" for r in serving if "rounds" in r})
    if paired:
        rounds = max(len(r["rounds"]) for r in serving if "rounds" in r)
        out += [f"At the steps a target reads ({', '.join(paired)}), the servers it compares "
                f"were measured in {rounds} alternated rounds, each a third of the model's "
                "window (two thirds at c=64); their figures in the tables are the median round's, and every round's "
                "figures are in serving.json (`rounds`).", ""]
    out += [f"![{p}]({p})" for p in plots if p.startswith("serving")]
    out += serving_tables(by, models)
    out += ["", "## Memory vs workers (resnet50)", ""] + memory_lines
    if memory_plots:
        out += ["", "![memory.png](memory.png)"]
    batching = load(args.results, "batching.json")
    if batching:
        out += ["", "## Dynamic batching on vs off", ""]
        out += simple_table(batching, ["model", "batching", "concurrency", "infer_per_s", "p50_ms",
                                       "p99_ms"])
    http = load(args.results, "http.json")
    if http:
        out += ["", "## HTTP/REST vs gRPC", ""]
        out += simple_table(http, ["model", "protocol", "concurrency", "infer_per_s", "p50_ms",
                                   "p99_ms"])
    out += ["", "## Not measured", "",
            "- GPU: Debian 12's libtorch is built without CUDA and this machine has no GPU; "
            "every figure is CPU-only. Archives may ask for `cuda` and the server refuses them "
            "here with FAILED_PRECONDITION.",
            "- Other machines: 2 cores is a small, noisy virtual machine; ratios between servers "
            "measured in one run are meaningful, absolute figures are not portable.",
            "- Triton and TorchServe themselves: not Debian packages, so not run here; "
            "python-processes stands for their Python-backend / worker-process pattern.",
            ""]
    path = os.path.join(args.results, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(out))
    print(f"wrote {path} and {', '.join(plots)}")
    print_rows(rows)
    return 1 if any_missed(rows) and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
