#!/usr/bin/python3
"""make bench-compile: torch.compile'd models in the interpreter pool beside
the same models eager (issue 40), on PyTorch 2.x.

1. At the model call: each archive loaded as manypy-server loads it, in a
   process of its own (tests/bench/bench_model_call.cc: the server's pool and
   intra-op default, PythonModel::Load, Executable::Run from 2 threads on 2
   interpreters), eager and compiled measured in alternated rounds (the order
   flips every round); per round the ratio compiled / eager, and for the
   small model compiled with 2 threads / 1 thread; medians with a bootstrap
   90% interval (tests/bench/paired_rounds.py) judged against the targets.
2. Served: each compiled archive over gRPC (manypy-server, 2 interpreters,
   dynamic batching off, one request one call), manypy-perf at concurrency 1
   and 16, beside the eager archive served the same way (reported).
3. Time to READY of a server with the compiled small model: 2 interpreters
   against 1 (each from an empty Inductor cache), and a restart with the
   cache the first start filled against a start from an empty one;
   alternated rounds, medians of the ratios. The same restart ratio of the
   small model compiled without freezing is reported beside it.

Models: "small" (bench-pool's 20 x Linear 8x8 + ReLU, batch 1),
"decoder_block" (RMSNorm, causal SDPA, SwiGLU; [1, 16, 128]) and resnet18
(models/, batch 1). The compiled archives' factory returns
torch.compile(build()) with Inductor's freezing on (the weights become
constants Inductor folds and, for Linear and convolutions, prepacks for
oneDNN: what makes resnet18 faster than eager at all). The small model is
also compiled without freezing and reported beside (at the model call and
its restart): a restart then loads AOTAutograd's graph from its cache,
which PyTorch 2.6 bypasses for frozen graphs (docs/packaging.md). Writes
one JSON file; exit status 1 when a target misses.

    /usr/bin/python3 tests/bench/bench_compile.py --build build --out bench-results/compile.json
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"), os.path.join(REPO, "models")]

from bench_aoti import Caller, bench_served, summary  # noqa: E402
from bench_common import start_manypy  # noqa: E402
from paired_rounds import verdict, write_verdicts  # noqa: E402

VARIANTS = ("eager", "compiled")
# (model, ratio key, target); issue 40. Higher is better for all.
TARGETS = (
    ("small", "compiled_over_eager", 2.5),
    ("resnet18", "compiled_over_eager", 1.2),
    ("small", "compiled_two_threads_over_one", 1.8),
)
READY_TARGETS = (("two_interpreters_over_one", 1.3), ("warm_restart_over_cold", 0.5))
# Reported beside the targets (no target): the small model without freezing.
READY_REPORTED = ("unfrozen_warm_restart_over_cold",)

# The factory module of each model's archives: the model's own build(),
# eager or compiled. Interned with the model's module by export_factory.
FACTORY = '''import torch
from {module} import build as _build


def build():
    model = _build()
    if not {compiled}:
        return model
    # Freezing: weights become constants that Inductor folds, and prepacks for
    # oneDNN (Linear, convolutions): what convolution networks need.
    torch._inductor.config.freezing = {freezing}
    return torch.compile(model)
'''
MODULES = {"small": "small_net_model", "decoder_block": "decoder_block_model",
           "resnet18": "resnet18"}
# Inductor's freezing per model (the compiled variant's factory).
FREEZING = {"small": True, "decoder_block": True, "resnet18": True}
# Packaged beside the measured ones: the small model compiled without
# freezing, reported beside the targets' (2.6 caches no AOTAutograd graph
# with freezing, so a frozen model's restart traces it again; without, the
# cold start is shorter too: docs/packaging.md).
UNFROZEN_SMALL = "small_compiled_unfrozen"


def example_inputs(name):
    import torch
    if name == "small":
        return {"inputs": [("INPUT__0", "FP32", [8])], "max_batch_size": 1}, (torch.ones(1, 8),)
    if name == "decoder_block":
        import decoder_block_model as m
        return dict(m.SIGNATURE), m.example_inputs()
    import resnet18 as m
    signature = {k: v for k, v in m.SIGNATURE.items() if k not in ("batching",)}
    return dict(signature, max_batch_size=1), m.example_inputs()


def package(repository, name, force):
    """<name>_eager.mpk and <name>_compiled.mpk in `repository` (and for the
    small model small_compiled_unfrozen.mpk)."""
    import manypy.package
    archives = [(f"{name}_{v}", v == "compiled", FREEZING[name]) for v in VARIANTS]
    if name == "small":
        archives.append((UNFROZEN_SMALL, True, False))
    for archive, compiled, freezing in archives:
        path = os.path.join(repository, f"{archive}.mpk")
        factory = os.path.join(repository, f"{archive}_factory.py")
        source = FACTORY.format(module=MODULES[name], compiled=compiled, freezing=freezing)
        if os.path.exists(path) and not force and _reads(factory) == source:
            continue
        start = time.monotonic()
        with open(factory, "w") as f:
            f.write(source)
        signature, example = example_inputs(name)
        manypy.package.export_factory(factory, "build", path=path, name=archive,
                                      example_inputs=example, **signature)
        print(f"[compile] packaged {path} in {time.monotonic() - start:.0f} s", file=sys.stderr)


def _reads(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def bench_model_call(binary, repository, name, rounds, seconds):
    """Eager and compiled at 2 threads on 2 interpreters (the server's
    intra-op default: 1 thread each on 2 cores); for "small" also compiled on
    1 interpreter with 1 intra-op thread, for T=2 / T=1 (as bench-pool's)."""
    processes = {v: (v, 2) for v in VARIANTS}
    if name == "small":
        processes["compiled_one_thread"] = ("compiled", 1)
        processes["compiled_unfrozen"] = ("compiled_unfrozen", 2)  # reported beside
    callers = {key: Caller(binary, os.path.join(repository, f"{name}_{v}.mpk"), threads,
                           intra_op_threads=1)
               for key, (v, threads) in processes.items()}
    per_round = []
    try:
        for c in callers.values():  # warm: caches, allocators, OpenMP's threads
            c.window(min(1.0, seconds))
        for r in range(rounds):
            keys = list(processes) if r % 2 == 0 else list(reversed(processes))
            measured = {k: callers[k].window(seconds) for k in keys}
            measured["compiled_over_eager"] = measured["compiled"]["per_s"] / measured["eager"]["per_s"]
            if "compiled_one_thread" in measured:
                measured["compiled_two_threads_over_one"] = (
                    measured["compiled"]["per_s"] / measured["compiled_one_thread"]["per_s"])
            if "compiled_unfrozen" in measured:
                measured["unfrozen_over_eager"] = (measured["compiled_unfrozen"]["per_s"] /
                                                   measured["eager"]["per_s"])
            per_round.append(measured)
            print(f"[compile] {name} round {r + 1}: " + ", ".join(
                f"{k} {measured[k]['per_s']:.0f}/s" for k in processes) +
                f"; compiled/eager {measured['compiled_over_eager']:.2f}x", file=sys.stderr)
    finally:
        for c in callers.values():
            c.close()
    result = {"seconds_per_window": seconds, "rounds": per_round}
    for k in processes:
        result[f"{k}_calls_per_s"] = summary([m[k]["per_s"] for m in per_round])
        result[f"{k}_cpu_us_per_call"] = summary([m[k]["cpu_us"] for m in per_round])
    for key in ("compiled_over_eager", "compiled_two_threads_over_one", "unfrozen_over_eager"):
        if key in per_round[0]:
            result[key] = summary([m[key] for m in per_round])
    return result


def served_variants(binaries, repository, name, seconds, concurrencies):
    """Each variant of `name` served as bench-aoti serves its archives."""
    served = {}
    for variant in VARIANTS:
        for key, figures in bench_served(binaries, repository, f"{name}_{variant}", seconds,
                                         concurrencies).items():
            served[f"{variant}_{key}"] = figures
    return served

def seconds_to_ready(server_binary, repository, model, interpreters, cache):
    """Seconds from exec to the server's "listening" line with `model` READY
    (loaded and warmed up on every interpreter: it compiles there)."""
    start = time.monotonic()
    server, _ = start_manypy(server_binary, repository, [model], interpreters,
                             [f"--compile-cache-dir={cache}"])
    ready = time.monotonic() - start
    server.terminate()
    server.wait()
    return ready


def bench_ready(binaries, repository, model, rounds, unfrozen=None, before=None):
    """Per round, in alternated order: `model` from an empty cache on 1 and
    on 2 interpreters, then the 2-interpreter server restarted on the cache
    it filled; `unfrozen` (the same model compiled without freezing), when
    given, cold and restarted on 2 interpreters, reported beside it;
    `before` (another build's binaries folder), when given, the same three
    starts of `model` with that build's server in the same rounds, reported
    as this build's time over its."""
    servers = {"": os.path.join(binaries, "manypy-server")}
    if before:
        servers["before_"] = os.path.join(before, "manypy-server")
    per_round = []
    with tempfile.TemporaryDirectory(prefix="manypy-bench-compile-") as tmp:
        for r in range(rounds):
            measured = {}
            starts = {}  # which -> (server, model, interpreters, cold key, warm key or None)
            for prefix, server in servers.items():
                starts[prefix + "one"] = (server, model, 1, f"{prefix}one_interpreter_cold_s", None)
                starts[prefix + "two"] = (server, model, 2, f"{prefix}two_interpreter_cold_s",
                                          f"{prefix}two_interpreters_warm_s")
            if unfrozen:
                starts["unfrozen"] = (servers[""], unfrozen, 2, "unfrozen_cold_s", "unfrozen_warm_s")
            order = list(starts) if r % 2 == 0 else list(reversed(starts))
            for which in order:
                cache = os.path.join(tmp, f"{which}-{r}")
                server, served, interpreters, cold, warm = starts[which]
                measured[cold] = seconds_to_ready(server, repository, served, interpreters, cache)
                if warm:  # the same cache again: a restart
                    measured[warm] = seconds_to_ready(server, repository, served, 2, cache)
                shutil.rmtree(cache, ignore_errors=True)
            for prefix in servers:
                measured[prefix + "two_interpreters_over_one"] = (
                    measured[f"{prefix}two_interpreter_cold_s"] /
                    measured[f"{prefix}one_interpreter_cold_s"])
                measured[prefix + "warm_restart_over_cold"] = (
                    measured[f"{prefix}two_interpreters_warm_s"] /
                    measured[f"{prefix}two_interpreter_cold_s"])
            if before:
                for key in ("one_interpreter_cold_s", "two_interpreter_cold_s",
                            "two_interpreters_warm_s"):
                    measured[f"over_before_{key[:-2]}"] = measured[key] / measured[f"before_{key}"]
            if unfrozen:
                measured["unfrozen_warm_restart_over_cold"] = (measured["unfrozen_warm_s"] /
                                                               measured["unfrozen_cold_s"])
            per_round.append(measured)
            print(f"[compile] ready round {r + 1}: " + ", ".join(
                f"{k} {v:.2f}" for k, v in measured.items()), file=sys.stderr)
    result = {"model": model, "rounds": per_round}
    for key in per_round[0]:
        result[key] = summary([m[key] for m in per_round])
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--repository", default=None, help="default: BUILD/compile-bench-repository")
    p.add_argument("--out", default="bench-results/compile.json")
    p.add_argument("--models", default="small,decoder_block,resnet18")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--ready-rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0, help="per variant per round")
    p.add_argument("--force", action="store_true", help="repackage the archives")
    p.add_argument("--ready-before", default=None,
                   help="the ready part also starts this build's manypy-server (its folder, "
                        "with bin/ and libexec/) in the same rounds and reports this build's "
                        "times over its")
    p.add_argument("--no-unfrozen", action="store_true",
                   help="the ready part leaves out the small model without freezing")
    p.add_argument("--parts", default="model_call,served,ready",
                   help="which parts to run (a full run is ~12 min): model_call (the "
                        "compiled/eager and T=2/T=1 targets), served, ready (time to READY "
                        "and the warm restart, with the small model)")
    a = p.parse_args()
    parts = set(a.parts.split(","))
    import torch
    if not hasattr(torch, "compile"):
        print(f"bench-compile: skipped: torch.compile is PyTorch 2.x's; this is {torch.__version__}")
        return 0
    repository = a.repository or os.path.join(a.build, "compile-bench-repository")
    os.makedirs(repository, exist_ok=True)
    models = a.models.split(",")
    for name in models:
        package(repository, name, a.force)
    binaries = os.path.join(a.build, "bin")
    result = {"cpus": os.cpu_count(), "torch": torch.__version__, "model_call": {}, "served": {},
              "targets": []}
    for name in models if "model_call" in parts else ():
        result["model_call"][name] = bench_model_call(
            os.path.join(binaries, "manypy-bench-model-call"), repository, name, a.rounds, a.seconds)
    for name in models if "served" in parts else ():
        result["served"][name] = served_variants(binaries, repository, name, a.seconds, (1, 16))
    if "small" in models and "ready" in parts:
        result["ready"] = bench_ready(
            binaries, repository, "small_compiled", a.ready_rounds,
            None if a.no_unfrozen else UNFROZEN_SMALL,
            os.path.join(a.ready_before, "bin") if a.ready_before else None)
    for name, key, target in TARGETS:
        if name in result["model_call"]:
            ratios = [m[key] for m in result["model_call"][name]["rounds"]]
            result["targets"].append(dict(verdict(ratios, target, True), model=name, ratio=key))
    if "unfrozen_over_eager" in result["model_call"].get("small", {}):
        print(f"[compile] reported: {UNFROZEN_SMALL} at the model call, compiled / eager "
              f"{result['model_call']['small']['unfrozen_over_eager']}", file=sys.stderr)
    if "ready" in result:
        for key, target in READY_TARGETS:
            ratios = [m[key] for m in result["ready"]["rounds"]]
            result["targets"].append(dict(verdict(ratios, target, False), model="small_compiled",
                                          ratio=key))
        for key in READY_REPORTED if "unfrozen_warm_s" in result["ready"] else ():
            print(f"[compile] reported: {UNFROZEN_SMALL} {key} {result['ready'][key]}", file=sys.stderr)
    missed = write_verdicts(result, a.out)
    return 1 if missed else 0

if __name__ == "__main__":
    sys.exit(main())
