#!/usr/bin/python3
"""llama_decoder's step in-process: the CPU time of one step(states) of
models/llama_decoder.py against the same file at a git revision (the
baseline, e.g. main before a change), in alternated rounds on one thread, no
server: decode steps 1 and 16 wide, and 1 or 16 requests joining at once (start,
prefill and first token). Thread CPU time, so other processes on a shared
machine slow it less than wall time; medians per round, the per-round ratios
current / baseline with bootstrap 90% intervals (paired_rounds.py). Not a
target of the issue: where make bench-generate's server time goes.

    /usr/bin/python3 tests/bench/bench_decoder_step.py --baseline-rev main \\
        --out bench-results/decoder_step.json
"""
import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from paired_rounds import bootstrap_interval  # noqa: E402

# (case, requests decoding, requests joining)
CASES = (("decode 1 wide", 1, 0), ("decode 8 wide", 8, 0), ("decode 16 wide", 16, 0),
         ("1 joining", 0, 1), ("16 joining", 0, 16), ("1 joining 7 decoding", 7, 1))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def inputs(i):
    return ([f"prompt {i % 8}".encode()], [b""], torch.tensor([250]), torch.tensor([0.8]),
            torch.tensor([i % 8]))


def step_ms(model, decoding, joining, repeats):
    """Median thread CPU time of one step of `decoding` running requests and
    `joining` new ones (their start() calls included), ms."""
    times = []
    states = [model.start(*inputs(i)) for i in range(decoding)]
    for _ in range(20 if states else 0):  # caches of about 30 positions, as in make bench-generate
        model.step(states)
    for _ in range(repeats):
        start = time.thread_time()
        model.step(states + [model.start(*inputs(i)) for i in range(joining)])
        times.append(time.thread_time() - start)
    return statistics.median(times) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--baseline-rev", default="main")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--repeats", type=int, default=30)
    p.add_argument("--out", default=os.path.join(REPO, "bench-results", "decoder_step.json"))
    args = p.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="manypy-decoder-step-") as folder:
        baseline = os.path.join(folder, "llama_decoder_baseline.py")
        with open(baseline, "w") as f:
            f.write(subprocess.run(["git", "-C", REPO, "show",
                                    f"{args.baseline_rev}:models/llama_decoder.py"],
                                   check=True, capture_output=True, text=True).stdout)
        sides = {"current": load(os.path.join(REPO, "models", "llama_decoder.py"), "ld_current"),
                 "baseline": load(baseline, "ld_baseline")}
        models = {side: m.build() for side, m in sides.items()}
        rounds = []
        with torch.inference_mode():
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(sides)[::-1]
                measured = {side: {case: step_ms(models[side], decoding, joining, args.repeats)
                                   for case, decoding, joining in CASES} for side in order}
                rounds.append(measured)
                print(f"[decoder_step] round {r + 1}: " + "; ".join(
                    f"{side} " + ", ".join(f"{c} {v:.2f} ms" for c, v in m.items())
                    for side, m in measured.items()), file=sys.stderr)
    result = {"baseline_rev": args.baseline_rev, "rounds": rounds, "load_average": os.getloadavg(),
              "cases": {}}
    for case, _, _ in CASES:
        entry = {}
        for side in ("current", "baseline"):
            values = [m[side][case] for m in rounds]
            entry[f"{side}_ms"] = statistics.median(values)
            entry[f"{side}_ms_interval"] = list(bootstrap_interval(values))
        ratios = [m["current"][case] / m["baseline"][case] for m in rounds]
        entry["ratio"] = statistics.median(ratios)
        entry["ratio_interval"] = list(bootstrap_interval(ratios))
        result["cases"][case] = entry
        print(f"llama_decoder {case}: {entry['current_ms']:.2f} ms vs {entry['baseline_ms']:.2f} ms "
              f"at {args.baseline_rev} ({entry['ratio']:.2f}x [{entry['ratio_interval'][0]:.2f}, "
              f"{entry['ratio_interval'][1]:.2f}])")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    import json
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
