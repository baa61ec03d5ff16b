#!/usr/bin/python3
"""make bench-generate: text generation with and without continuous batching.

models/llama_decoder packaged twice into a temporary repository: `batched`
(continuous_batching = 16: one running batch per interpreter, one forward
pass per step for every stream) and `unbatched` (continuous_batching = 0:
each stream its own generator). Over gRPC streaming (ModelStreamInfer), at
1, 4 and 16 concurrent streams, the two sides in alternated rounds; per side
and round: tokens/s, time to first token (p50), per-token latency (the gap
between two tokens of a stream, p99), and every stream checked against the
text the same prompt and seed give alone (a lost, extra or reordered piece
fails it). Targets, from the per-round ratios (paired_rounds.py): tokens/s
at 16 streams batched >= 4x unbatched; batched time to first token p50 at 16
streams <= 2x at 1 stream; 0 streams lost or reordered.

    /usr/bin/python3 tests/bench/bench_generate.py --build build \\
        --out bench-results/generate.json [--quick]
"""
import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python"), os.path.join(REPO, "models")]

import numpy as np  # noqa: E402

from bench_common import start_manypy  # noqa: E402
from paired_rounds import bootstrap_interval, verdict, write_verdicts  # noqa: E402

SIDES = ("batched", "unbatched")
THROUGHPUT_TARGET, TTFT_TARGET = 4.0, 2.0


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def package(folder):
    import manypy.package
    import llama_decoder
    for side in SIDES:
        model = llama_decoder.build()
        model.continuous_batching = 16 if side == "batched" else 0  # pickled with the model
        manypy.package.export(model, os.path.join(folder, f"{side}.mpk"), name=side,
                              example_inputs=llama_decoder.example_inputs(),
                              modules=[llama_decoder], **llama_decoder.SIGNATURE)


def request(prompt, tokens, seed):
    return {"PROMPT": np.array([prompt.encode()], dtype=object),
            "MESSAGES": np.array([b""], dtype=object),
            "MAX_TOKENS": np.array([tokens], dtype=np.int64),
            "TEMPERATURE": np.array([0.8], dtype=np.float32),
            "SEED": np.array([seed], dtype=np.int64)}


def one_stream(client, model, prompt, tokens, seed):
    """(text, time to first token s, gaps between tokens s, finish reasons)."""
    start = time.perf_counter()
    last, first, gaps, text, reasons = start, None, [], [], []
    for r in client.generate_stream(model, request(prompt, tokens, seed)):
        now = time.perf_counter()
        if first is None:
            first = now - start
        else:
            gaps.append(now - last)
        last = now
        text.append(r.as_numpy("TEXT")[0])
        reasons.append(r.as_numpy("FINISH_REASON")[0])
    return b"".join(text), first, gaps, reasons


def run_side(clients, model, concurrency, streams, tokens, reference):
    """`streams` streams over `concurrency` clients; the side's figures."""
    todo = list(range(streams))
    lock = threading.Lock()
    firsts, gaps, wrong, count = [], [], [], [0]

    def worker(i):
        while True:
            with lock:
                if not todo:
                    return
                n = todo.pop()
            prompt, seed = f"prompt {n % 8}", n % 8
            text, first, between, reasons = one_stream(clients[i], model, prompt, tokens, seed)
            ok = (text == reference[(prompt, seed)] and reasons[-1] == b"length"
                  and all(r == b"" for r in reasons[:-1]))
            with lock:
                firsts.append(first)
                gaps.extend(between)
                count[0] += len(reasons)
                if not ok:
                    wrong.append(n)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {"tokens_per_s": count[0] / wall, "ttft_p50_ms": statistics.median(firsts) * 1e3,
            "token_p99_ms": percentile(gaps, 99) * 1e3, "streams": streams,
            "lost_or_reordered": len(wrong), "seconds": wall}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--out", default="bench-results/generate.json")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--streams-per-client", type=int, default=4)
    p.add_argument("--interpreters", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="2 rounds of short streams: a smoke run")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.tokens, args.streams_per_client = 2, 8, 1
    sys.path.insert(0, os.path.join(args.build, "python"))
    from manypy.client import InferenceClient
    binary = os.path.join(args.build, "bin", "manypy-server")
    result = {"interpreters": args.interpreters, "cpus": os.cpu_count(), "tokens": args.tokens,
              "quick": args.quick, "protocol": "grpc"}
    with tempfile.TemporaryDirectory(prefix="manypy-bench-generate-") as folder:
        package(folder)
        proc, ports = start_manypy(binary, folder, list(SIDES), args.interpreters)
        try:
            address = f"127.0.0.1:{ports['grpc']}"
            alone = InferenceClient(address, timeout=120)
            reference = {}
            for n in range(8):  # each prompt alone, on the side without batching
                key = (f"prompt {n}", n)
                reference[key] = one_stream(alone, "unbatched", *key[:1], args.tokens, n)[0]
                if one_stream(alone, "batched", *key[:1], args.tokens, n)[0] != reference[key]:
                    raise SystemExit(f"{key}: the batched model's text alone differs")
            alone.close()
            levels = {}
            for concurrency in (1, 4, 16):
                clients = [InferenceClient(address, timeout=120) for _ in range(concurrency)]
                streams = concurrency * args.streams_per_client
                rounds = []
                for r in range(args.rounds):
                    order = SIDES if r % 2 == 0 else SIDES[::-1]
                    measured = {side: run_side(clients, side, concurrency, streams, args.tokens,
                                               reference) for side in order}
                    rounds.append(measured)
                    print(f"[generate] c={concurrency} round {r + 1}: " + "; ".join(
                        f"{s} {m['tokens_per_s']:.0f} tokens/s, TTFT p50 {m['ttft_p50_ms']:.1f} ms, "
                        f"token p99 {m['token_p99_ms']:.1f} ms, lost {m['lost_or_reordered']}"
                        for s, m in measured.items()), file=sys.stderr)
                for c in clients:
                    c.close()
                entry = {"rounds": rounds}
                for side in SIDES:
                    for figure in ("tokens_per_s", "ttft_p50_ms", "token_p99_ms"):
                        values = [m[side][figure] for m in rounds]
                        entry[f"{side}_{figure}"] = statistics.median(values)
                        entry[f"{side}_{figure}_interval"] = list(bootstrap_interval(values))
                levels[concurrency] = entry
            result["levels"] = {str(c): e for c, e in levels.items()}
        finally:
            proc.terminate()
            proc.wait()
    lost = sum(m[s]["lost_or_reordered"] for e in levels.values() for m in e["rounds"] for s in SIDES)
    throughput = verdict([m["batched"]["tokens_per_s"] / m["unbatched"]["tokens_per_s"]
                          for m in levels[16]["rounds"]], THROUGHPUT_TARGET, True)
    ttft = verdict([a["batched"]["ttft_p50_ms"] / b["batched"]["ttft_p50_ms"]
                    for a, b in zip(levels[16]["rounds"], levels[1]["rounds"])], TTFT_TARGET, False)
    throughput.update(model="llama_decoder", ratio="tokens/s at 16 streams, batched / unbatched")
    ttft.update(model="llama_decoder", ratio="TTFT p50 batched, 16 streams / 1 stream")
    lost_row = {"model": "llama_decoder", "ratio": "streams lost or reordered", "median": lost,
                "target": 0, "higher_is_better": False, "rounds": args.rounds,
                "verdict": "holds" if lost == 0 else "misses"}
    result["targets"] = [throughput, ttft, lost_row]
    missed = write_verdicts(result, args.out)
    if args.quick:  # a smoke run judges only what cannot be noise
        return 1 if lost else 0
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
