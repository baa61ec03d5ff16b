#!/usr/bin/python3
"""The OpenAI route's own cost (issue 44 item 5, the route's part): the same
streamed generation through POST /v1/completions (server-sent events, JSON
chunks; through the official `openai` client where it is installed, else
plain HTTP) and through gRPC ModelStreamInfer (manypy.client), on the test
suite's byte_writer (tests/server/models/openai_models.py: one character a
response, no model work), so the difference is the route's: decoding the
OpenAI request, one JSON chunk per response, the client's parsing.

Alternated rounds; per round and side, `--streams` streams one after the
other: each stream's time to first token and whole time; over the rounds,
the ratio route / gRPC of the per-round medians with a bootstrap 90%
interval, tokens per second per side, and every stream's text checked
(0 lost or reordered chunks).

    /usr/bin/python3 tests/bench/bench_openai_route.py --build build \\
        --out bench-results/openai_route.json
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python"),
                os.path.join(REPO, "tests", "server", "models")]

import numpy as np  # noqa: E402

from bench_common import start_manypy  # noqa: E402
from paired_rounds import verdict, write_verdicts  # noqa: E402

PROMPT = "abcdefgh"
# The route may cost this much more than gRPC per stream on a model doing no work.
TARGET = 2.0

try:
    import openai
except ImportError:  # Debian 12: plain HTTP instead
    openai = None


def expected(tokens):
    return "".join(PROMPT[i % len(PROMPT)] for i in range(tokens))


def grpc_stream(client, tokens):
    inputs = {"PROMPT": np.array([PROMPT.encode()], dtype=object),
              "MESSAGES": np.array([b""], dtype=object),
              "MAX_TOKENS": np.array([tokens], dtype=np.int64),
              "TEMPERATURE": np.array([1.0], dtype=np.float32),
              "TOP_P": np.array([1.0], dtype=np.float32),
              "STOP": np.array([], dtype=object),
              "SEED": np.array([-1], dtype=np.int64)}
    start = time.perf_counter()
    first, text = None, ""
    for result in client.generate_stream("byte_writer", inputs):
        piece = result.as_numpy("TEXT")[0]
        if piece and first is None:
            first = time.perf_counter() - start
        text += piece.decode() if isinstance(piece, bytes) else str(piece)
    return first, time.perf_counter() - start, text


def route_stream(address, tokens, client=None):
    body = {"model": "byte_writer", "prompt": PROMPT, "max_tokens": tokens, "stream": True}
    start = time.perf_counter()
    first, text = None, ""
    if client is not None:
        for chunk in client.completions.create(**body):
            piece = chunk.choices[0].text
            if piece and first is None:
                first = time.perf_counter() - start
            text += piece
        return first, time.perf_counter() - start, text
    host, port = address.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    for line in response:
        if not line.startswith(b"data: {"):
            continue
        piece = json.loads(line[6:])["choices"][0]["text"]
        if piece and first is None:
            first = time.perf_counter() - start
        text += piece
    conn.close()
    return first, time.perf_counter() - start, text


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--streams", type=int, default=20, help="streams per side and round")
    parser.add_argument("--tokens", type=int, default=64, help="responses per stream")
    parser.add_argument("--out", default=os.path.join(REPO, "bench-results", "openai_route.json"))
    args = parser.parse_args()

    import make_server_test_models
    from manypy.client import InferenceClient
    with tempfile.TemporaryDirectory(prefix="manypy-openai-bench-") as repository:
        make_server_test_models.export_openai_models(repository)
        proc, ports = start_manypy(os.path.join(args.build, "bin", "manypy-server"),
                                   os.path.join(repository, "openai"), ["byte_writer"], 2)
        address = f"127.0.0.1:{ports['http']}"
        grpc = InferenceClient(f"127.0.0.1:{ports['grpc']}", timeout=60)
        client = openai.OpenAI(base_url=f"http://{address}/v1", api_key="unused",
                               max_retries=0) if openai else None
        want = expected(args.tokens)
        sides = {"grpc": lambda: grpc_stream(grpc, args.tokens),
                 "openai_route": lambda: route_stream(address, args.tokens, client)}
        rounds, wrong = [], 0
        try:
            for side in sides.values():  # warm both paths
                side()
            for r in range(args.rounds):
                record = {}
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                for name in order:
                    runs = [sides[name]() for _ in range(args.streams)]
                    wrong += sum(text != want for _, _, text in runs)
                    record[name] = {"ttft_s": statistics.median(f for f, _, _ in runs),
                                    "stream_s": statistics.median(t for _, t, _ in runs),
                                    "tokens_per_s": args.tokens * len(runs) / sum(t for _, t, _ in runs)}
                rounds.append(record)
        finally:
            grpc.close()
            if client is not None:
                client.close()
            proc.terminate()
            proc.wait(timeout=60)
    ratio = [r["openai_route"]["stream_s"] / r["grpc"]["stream_s"] for r in rounds]
    ttft = [r["openai_route"]["ttft_s"] / r["grpc"]["ttft_s"] for r in rounds]
    result = {
        "client": "openai " + openai.__version__ if openai else "plain HTTP (no openai package)",
        "tokens": args.tokens, "streams_per_round": args.streams, "rounds": rounds,
        "lost_or_reordered_streams": wrong,
        "targets": [
            dict(verdict(ratio, TARGET, higher_is_better=False), model="byte_writer",
                 ratio="stream time, /v1/completions / gRPC"),
            dict(verdict(ttft, TARGET, higher_is_better=False), model="byte_writer",
                 ratio="time to first token, /v1/completions / gRPC"),
        ]}
    for side in ("grpc", "openai_route"):
        result[side + "_tokens_per_s_median"] = statistics.median(r[side]["tokens_per_s"] for r in rounds)
    print(f"client: {result['client']}; streams with lost or reordered chunks: {wrong}")
    print(f"tokens/s: gRPC {result['grpc_tokens_per_s_median']:.0f}, "
          f"route {result['openai_route_tokens_per_s_median']:.0f}")
    missed = write_verdicts(result, args.out)
    sys.exit(1 if missed or wrong else 0)


if __name__ == "__main__":
    main()
