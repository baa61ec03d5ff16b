#!/usr/bin/python3
"""make bench-generate: text generation with and without continuous batching.

models/llama_decoder packaged twice into a temporary repository: `batched`
(continuous_batching = 16, instance_count 1: one running batch of up to 16
streams, one forward pass per step for every stream) and `unbatched`
(continuous_batching = 0: each stream its own generator, on either of the 2
interpreters). One running batch, not one per interpreter: a step's fixed
cost (about 0.7 ms of CPU, make bench-decoder-step) is shared by twice the
streams, so at 16 streams the server spends about 190 us of CPU per token
against about 280 with two batches of 8, and the second core is left to
gRPC and the load generators that share these 2 cores (--batched-instances 0
measures two). Over gRPC streaming (ModelStreamInfer), at
1, 4 and 16 concurrent streams, the two sides in alternated rounds; per side
and round: tokens/s, time to first token (p50), per-token latency (the gap
between two tokens of a stream, p99), and every stream checked against the
text the same prompt and seed give alone (a lost, extra or reordered piece
fails it). Beside them, in the same rounds, `batched_openai`: the batched
model's same streams through POST /v1/completions (server-sent events;
through the official `openai` client where it is installed, as in the
Debian 13 root, else plain HTTP), to show the OpenAI route's own cost
against the gRPC figures. And `batched_cpp` / `unbatched_cpp`: the same
models over gRPC from the C++ load generator (manypy-perf --streaming, one
thread per stream, every stream the same prompt, its text not checked).

Targets, from the per-round ratios (paired_rounds.py), judged on the C++
load generator's sides, as Triton's are with perf_analyzer: tokens/s at 16
streams batched >= 4x unbatched; batched time to first token p50 at 16
streams <= 2x at 1 stream; and 0 streams lost or reordered on the sides that
check every text (Python gRPC and the route). The clients run on the
server's 2 cores: the Python gRPC client spends about as much CPU per token
as the batched server (130-150 us against 200-300), so its ratios measure
the client as much as the server; the same ratios from the Python client
and through the route are reported beside the targets, not judged.

    /usr/bin/python3 tests/bench/bench_generate.py --build build \\
        --out bench-results/generate.json [--quick] [--cpp-only] [--vary-tokens 16,24,32,40,48]

--vary-tokens makes the C++ sides' streams ask for token counts that vary per
request (as genai-perf's --output-tokens-mean/--output-tokens-stddev or
perf_analyzer's several --input-data sets would), so closed-loop streams do
not drift into lockstep; reported evidence, not the judged workload.
"""
import argparse
import http.client
import json
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

from bench_common import perf_window, start_manypy  # noqa: E402
from paired_rounds import bootstrap_interval, verdict, write_verdicts  # noqa: E402

SIDES = ("batched", "unbatched")  # the two packagings, over gRPC
ROUTE = "batched_openai"  # the batched model through /v1/completions
CPP = {"batched_cpp": "batched", "unbatched_cpp": "unbatched"}  # manypy-perf's sides
CPP_PROMPT, CPP_SEED = "prompt 3", 3
TEMPERATURE = 0.8

try:
    import openai
except ImportError:  # Debian 12: plain HTTP instead
    openai = None
THROUGHPUT_TARGET, TTFT_TARGET = 4.0, 2.0
THROUGHPUT_RATIO = "tokens/s at 16 streams, batched / unbatched"
TTFT_RATIO = "TTFT p50 batched, 16 streams / 1 stream"
CLIENTS = {"cpp": "C++ client (manypy-perf)", "python": "Python gRPC client",
           "route": "/v1/completions (Python HTTP or openai client)"}


def throughput_ratios(levels, batched, unbatched):
    """Per round at 16 streams: `batched`'s tokens/s over `unbatched`'s."""
    return [m[batched]["tokens_per_s"] / m[unbatched]["tokens_per_s"] for m in levels[16]["rounds"]]


def ttft_ratios(levels, side):
    """Per round: `side`'s TTFT p50 at 16 streams over its TTFT p50 at 1."""
    return [a[side]["ttft_p50_ms"] / b[side]["ttft_p50_ms"]
            for a, b in zip(levels[16]["rounds"], levels[1]["rounds"])]


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))]


def package(folder, batched_instances=0):
    import manypy.package
    import llama_decoder
    for side in SIDES:
        model = llama_decoder.build()
        model.continuous_batching = 16 if side == "batched" else 0  # pickled with the model
        manypy.package.export(model, os.path.join(folder, f"{side}.mpk"), name=side,
                              example_inputs=llama_decoder.example_inputs(),
                              modules=[llama_decoder], openai=llama_decoder.OPENAI,
                              instance_count=batched_instances if side == "batched" else 0,
                              **llama_decoder.SIGNATURE)


def request(prompt, tokens, seed):
    return {"PROMPT": np.array([prompt.encode()], dtype=object),
            "MESSAGES": np.array([b""], dtype=object),
            "MAX_TOKENS": np.array([tokens], dtype=np.int64),
            "TEMPERATURE": np.array([TEMPERATURE], dtype=np.float32),
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


def route_stream(target, model, prompt, tokens, seed):
    """one_stream's figures through POST /v1/completions: `target` is an
    openai.OpenAI client, or "host:port" for plain HTTP. A piece is a chunk's
    text; the reasons are "" per piece and the final chunk's finish_reason
    in place of the last one's (the route sends it in a chunk of its own)."""
    body = {"model": model, "prompt": prompt, "max_tokens": tokens, "temperature": TEMPERATURE,
            "seed": seed, "stream": True}
    start = time.perf_counter()
    last, first, gaps, text, finish = start, None, [], [], None

    def piece(chunk_text, reason):
        nonlocal last, first, finish
        if reason:
            finish = reason.encode()
        if not chunk_text:
            return
        now = time.perf_counter()
        if first is None:
            first = now - start
        else:
            gaps.append(now - last)
        last = now
        text.append(chunk_text.encode())

    if not isinstance(target, str):
        for chunk in target.completions.create(**body):
            piece(chunk.choices[0].text, chunk.choices[0].finish_reason)
    else:
        host, port = target.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        conn.request("POST", "/v1/completions", json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        if response.status != 200:
            raise SystemExit(f"/v1/completions answered {response.status}: {response.read()!r}")
        for line in response:
            if line.startswith(b"data: {"):
                choice = json.loads(line[6:])["choices"][0]
                piece(choice["text"], choice["finish_reason"])
        conn.close()
    reasons = [b""] * (len(text) - 1) + [finish or b""] if text else [finish or b""]
    return b"".join(text), first, gaps, reasons


def perf_inputs(folder, tokens, vary=None):
    """manypy-perf --input flags: raw little-endian files (BYTES: a 4-byte
    length before each element) for one request of `tokens` tokens; with
    `vary` (a list of token counts), MAX_TOKENS given once per count instead,
    so manypy-perf cycles them per request (each stream from its own offset)."""
    def text(value):
        return len(value).to_bytes(4, "little") + value
    files = {"PROMPT": text(CPP_PROMPT.encode()), "MESSAGES": text(b""),
             "MAX_TOKENS": np.array([tokens], dtype="<i8").tobytes(),
             "TEMPERATURE": np.array([TEMPERATURE], dtype="<f4").tobytes(),
             "SEED": np.array([CPP_SEED], dtype="<i8").tobytes()}
    flags = []
    for name, data in files.items():
        variants = [data]
        if name == "MAX_TOKENS" and vary:
            variants = [np.array([n], dtype="<i8").tobytes() for n in vary]
        for i, variant in enumerate(variants):
            path = os.path.join(folder, f"{name}.bin" if len(variants) == 1 else f"{name}.{i}.bin")
            with open(path, "wb") as f:
                f.write(variant)
            flags += ["--input", f"{name}={path}"]
    return flags


def perf_side(perf, port, model, concurrency, seconds, inputs):
    """One manypy-perf --streaming window over gRPC: tokens/s and time to first
    token p50 (no per-token gaps: it times the first response only)."""
    record = perf_window(perf, port, model, concurrency, seconds, warmup=0.5,
                         extra=["--streaming", *inputs])
    return {"tokens_per_s": record["responses_per_s"],
            "ttft_p50_ms": record["first_response_p50_ms"], "token_p99_ms": None,
            "streams": record["requests"], "lost_or_reordered": None,
            "seconds": record["seconds"]}


def run_side(streamer, concurrency, streams, tokens, reference):
    """`streams` streams over `concurrency` workers (worker i streams with
    streamer(i, prompt, tokens, seed)); the side's figures."""
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
            text, first, between, reasons = streamer(i, prompt, tokens, seed)
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
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--streams-per-client", type=int, default=4)
    p.add_argument("--interpreters", type=int, default=2)
    p.add_argument("--batched-instances", type=int, default=1,
                   help="running batches of the batched model (its instance_count; 0: one per "
                        "interpreter)")
    p.add_argument("--perf-seconds", type=float, default=1.5,
                   help="the measurement window of each manypy-perf side")
    p.add_argument("--quick", action="store_true", help="2 rounds of short streams: a smoke run")
    p.add_argument("--cpp-only", action="store_true",
                   help="only the C++ load generator's sides (the judged ones): a shorter run "
                        "while iterating, whose texts (but the reference ones) go unchecked")
    p.add_argument("--vary-tokens", metavar="A,B,...",
                   help="the C++ load generator's sides ask for these token counts, cycled per "
                        "request and spread across streams (e.g. 16,24,32,40,48: mean 32), in "
                        "place of --tokens for all; the Python and route sides ignore it (they "
                        "keep --tokens, their texts checked against it). Default: every request "
                        "--tokens")
    args = p.parse_args()
    vary = None
    if args.vary_tokens:
        try:
            vary = [int(n) for n in args.vary_tokens.split(",")]
        except ValueError:
            p.error("--vary-tokens wants comma-separated integers")
        if not vary or min(vary) < 1:
            p.error("--vary-tokens wants token counts >= 1")
    if args.quick:
        args.rounds, args.tokens, args.streams_per_client, args.perf_seconds = 2, 8, 1, 0.5
    sys.path.insert(0, os.path.join(args.build, "python"))
    from manypy.client import InferenceClient
    binary = os.path.join(args.build, "bin", "manypy-server")
    perf = os.path.join(args.build, "bin", "manypy-perf")
    result = {"interpreters": args.interpreters, "batched_instances": args.batched_instances, "cpus": os.cpu_count(), "tokens": args.tokens,
              "cpp_vary_tokens": vary,
              "quick": args.quick, "protocol": "grpc",
              "route_client": f"openai {openai.__version__}" if openai else "plain HTTP",
              "load_average_start": list(os.getloadavg())}
    with tempfile.TemporaryDirectory(prefix="manypy-bench-generate-") as folder:
        package(folder, args.batched_instances)
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
            http_address = f"127.0.0.1:{ports['http']}"
            inputs = perf_inputs(folder, args.tokens, vary)
            levels = {}
            for concurrency in (1, 4, 16):
                clients = [InferenceClient(address, timeout=120) for _ in range(concurrency)]
                routes = [openai.OpenAI(base_url=f"http://{http_address}/v1", api_key="unused",
                                        max_retries=0, timeout=120) if openai else http_address
                          for _ in range(concurrency)]
                streamers = {
                    side: (lambda side: lambda i, *a: one_stream(clients[i], side, *a))(side)
                    for side in SIDES}
                streamers[ROUTE] = lambda i, *a: route_stream(routes[i], "batched", *a)
                everyone = tuple(CPP) if args.cpp_only else SIDES + (ROUTE,) + tuple(CPP)
                streams = concurrency * args.streams_per_client
                rounds = []
                for r in range(args.rounds):
                    order = everyone if r % 2 == 0 else everyone[::-1]
                    measured = {
                        side: perf_side(perf, ports["grpc"], CPP[side], concurrency,
                                        args.perf_seconds, inputs) if side in CPP
                        else run_side(streamers[side], concurrency, streams, args.tokens, reference)
                        for side in order}
                    rounds.append(measured)
                    print(f"[generate] c={concurrency} round {r + 1}: " + "; ".join(
                        f"{s} {m['tokens_per_s']:.0f} tokens/s, TTFT p50 {m['ttft_p50_ms']:.1f} ms"
                        + ("" if s in CPP else f", token p99 {m['token_p99_ms']:.1f} ms, "
                                              f"lost {m['lost_or_reordered']}")
                        for s, m in measured.items()), file=sys.stderr)
                for c in clients:
                    c.close()
                for c in routes:
                    if not isinstance(c, str):
                        c.close()
                entry = {"rounds": rounds}
                for side in everyone:
                    for figure in ("tokens_per_s", "ttft_p50_ms", "token_p99_ms"):
                        values = [m[side][figure] for m in rounds]
                        if values[0] is None:
                            continue
                        entry[f"{side}_{figure}"] = statistics.median(values)
                        entry[f"{side}_{figure}_interval"] = list(bootstrap_interval(values))
                # The route's own cost: its figures over the gRPC ones, per round.
                for figure in () if args.cpp_only else ("tokens_per_s", "ttft_p50_ms"):
                    ratios = [m[ROUTE][figure] / m["batched"][figure] for m in rounds]
                    entry[f"route_over_grpc_{figure}"] = statistics.median(ratios)
                    entry[f"route_over_grpc_{figure}_interval"] = list(bootstrap_interval(ratios))
                levels[concurrency] = entry
            result["levels"] = {str(c): e for c, e in levels.items()}
        finally:
            proc.terminate()
            proc.wait()
    result["load_average_end"] = list(os.getloadavg())
    # The sides whose every text is checked (--cpp-only runs none of them, so
    # it has no figure for lost or reordered streams and judges none).
    checked = () if args.cpp_only else SIDES + (ROUTE,)
    lost = sum(m[s]["lost_or_reordered"] for e in levels.values() for m in e["rounds"]
               for s in checked)
    result["targets"] = [
        dict(verdict(throughput_ratios(levels, "batched_cpp", "unbatched_cpp"), THROUGHPUT_TARGET,
                     True), model=f"llama_decoder, {CLIENTS['cpp']}", ratio=THROUGHPUT_RATIO),
        dict(verdict(ttft_ratios(levels, "batched_cpp"), TTFT_TARGET, False),
             model=f"llama_decoder, {CLIENTS['cpp']}", ratio=TTFT_RATIO)]
    if checked:
        result["targets"].append(
            {"model": "llama_decoder", "ratio": "streams lost or reordered (Python gRPC and route sides)",
             "median": lost, "target": 0, "higher_is_better": False, "rounds": args.rounds,
             "verdict": "holds" if lost == 0 else "misses"})
    # Beside the targets, not judged: the same ratios from the Python client
    # (and through the route, over the Python client's unbatched side).
    result["reported"] = [] if args.cpp_only else [
        dict(verdict(throughput_ratios(levels, "batched", "unbatched"), THROUGHPUT_TARGET, True),
             model=f"llama_decoder, {CLIENTS['python']}", ratio=THROUGHPUT_RATIO),
        dict(verdict(ttft_ratios(levels, "batched"), TTFT_TARGET, False),
             model=f"llama_decoder, {CLIENTS['python']}", ratio=TTFT_RATIO),
        dict(verdict(throughput_ratios(levels, ROUTE, "unbatched"), THROUGHPUT_TARGET, True),
             model=f"llama_decoder, {CLIENTS['route']}",
             ratio="tokens/s at 16 streams, batched through the route / unbatched over gRPC "
                   "(Python client)"),
        dict(verdict(ttft_ratios(levels, ROUTE), TTFT_TARGET, False),
             model=f"llama_decoder, {CLIENTS['route']}", ratio=TTFT_RATIO)]
    for t in result["reported"]:
        t["verdict"] = "reported (not judged: " + t["verdict"] + " against the target)"
    missed = write_verdicts(result, args.out)
    for t in result["reported"]:
        print(f"{t['model']} {t['ratio']}: {t['median']:.2f} [{t['interval'][0]:.2f}, "
              f"{t['interval'][1]:.2f}]: {t['verdict']}")
    if args.quick:  # a smoke run judges only what cannot be noise
        return 1 if lost else 0
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
