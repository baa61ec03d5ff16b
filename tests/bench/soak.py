#!/usr/bin/python3
"""make soak: one manypy-server under steady mixed traffic with periodic reloads.

Starts manypy-server (explicit model control, 2 interpreters) and one
manypy-perf per stream for the whole run: a fixed mean rate of one model over
gRPC or HTTP with Poisson arrivals (--distribution), on connections kept open
throughout as a real client's would be, measured in windows of
--window-seconds, each written as a JSON line when it closes (--window-log).
Poisson rather than evenly spaced arrivals: streams at fixed periods (50 ms,
66.7 ms, 500 ms) meet each other at phases that drift slowly, so which requests
collide, and so each window's p99, wandered from window to window with the
phase rather than with the server (python_heavy's p99 rose for five windows
running on 2026-11-30); independent arrivals give every window the same odds.
Every --reload-seconds (10) of each window, at the same offsets in every
window, it reloads every served model in turn (RepositoryModelLoad on a loaded
model: the new copy loads and warms up one interpreter at a time while the rest
serve, then the old one drains and is unloaded). At each window's end it reads
the server's resident memory and CPU time from /proc. The first 10% of the
windows (at least one) are warm-up. (Up to 2026-12-01 each window started a
fresh manypy-perf per stream: six process starts and new connections at every
window's start, inside the measurement.)

Verdicts (tests/bench/soak_verdicts.py), all written to --out with the raw
per-window figures; the exit status is 1 if one fails:
  errors  no failed request, reload or manypy-perf run, no failure in the
          server's own statistics, a clean exit: nothing is expected to fail
  rss     resident memory at the end < 1.05 x at the end of warm-up
  rss_trend  the slope of resident memory over every window after warm-up
          (Theil-Sen, a 90% interval), as growth per hour of its median:
          fails only when the whole interval is above --rss-max-growth-per-hour
  p99     per stream, the same trend of each window's p99 (windows with at
          least --min-p99-samples requests), against --p99-max-growth-per-hour:
          "holds" (interval below the limit), "misses" (above: fails) or
          "inconclusive" (straddles it, or under 5 windows), with the interval.
          Not two windows against each other: one window's p99 follows how
          fast this shared machine was then (2026-12-01: p99 moved 1.8-6.8 ms
          window to window at a fixed load), which widens a trend's interval
          but does not tilt it; a leak or a slow degradation does.
The default rates cost the server 20-30% of one core (a tenth of this 2-core
machine; each model alone serves 10-100x its rate at concurrency 1), so p99
watches stability, not saturation. It includes the reloads: while one
interpreter loads a model, requests wait for the other.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench_common import cpu_seconds, start_manypy
from soak_verdicts import errors_verdict, p99_trend_verdict, rss_trend_verdict, rss_verdict

# MODEL:PROTOCOL:REQUESTS_PER_S. two_io: protocol overhead (~0.5 ms); python_heavy:
# Python-bound, dynamic batching; text_classifier: BYTES inputs; mobilenet_v3_small:
# a small CNN (tens of ms on one core), so its rate is low.
DEFAULT_STREAMS = ["two_io:grpc:20", "two_io:http:20", "python_heavy:grpc:15",
                   "text_classifier:http:15", "mobilenet_v3_small:grpc:2",
                   "mobilenet_v3_small:http:2"]
# Each stream's traffic before its first window: connections made, first calls done.
PERF_WARMUP_SECONDS = 2.0


def parse_stream(text):
    try:
        model, protocol, rate = text.split(":")
        if protocol not in ("grpc", "http") or float(rate) <= 0:
            raise ValueError
        return {"model": model, "protocol": protocol, "rate": float(rate)}
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stream '{text}': want MODEL:grpc|http:RATE (RATE > 0)")


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def http(port, path, body=None, timeout=300):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     method="POST" if body is not None else "GET")
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read() or b"{}")


def server_counts(port):
    """{model: (successes, failures)} from the server's statistics (per
    version, kept across reloads of that version)."""
    counts = {}
    for m in http(port, "/v2/models/stats").get("model_stats", []):
        stats = m.get("inference_stats", {})
        counts[m["name"]] = (int(stats.get("success", {}).get("count", 0)),
                             int(stats.get("fail", {}).get("count", 0)))
    return counts


def reload_all(port, models):
    """Reloads each model in turn; one record per reload."""
    records = []
    for model in models:
        start = time.monotonic()
        try:
            http(port, f"/v2/repository/models/{model}/load", body=b"")
            record = {"model": model, "ok": True}
        except Exception as e:  # an HTTP error status or a dead server: both are findings
            detail = e.read().decode(errors="replace") if hasattr(e, "read") else ""
            record = {"model": model, "ok": False, "error": f"{e} {detail}".strip()}
        record["seconds"] = round(time.monotonic() - start, 3)
        records.append(record)
    return records


def perf_command(perf, stream, port, args, log, out):
    """One stream's manypy-perf for the whole soak: --warmup-seconds, then
    every window measured (--stability-percent 0) and logged as it closes."""
    return [perf, "-m", stream["model"], "-i", stream["protocol"], "-u", f"127.0.0.1:{port}",
            "--rate", f"{stream['rate']:g}", "--distribution", args.distribution,
            "--max-threads", "4",
            "--warmup-seconds", f"{PERF_WARMUP_SECONDS:g}",
            "--window-seconds", f"{args.window_seconds:g}", "--max-windows",
            str(args.windows_total), "--stability-percent", "0", "--window-log", log,
            "--json", out, "--csv", os.devnull]


def last_line(err):
    """The last line a manypy-perf wrote to its stderr file, for a perf_error."""
    err.seek(0)
    return (err.read().strip().splitlines()[-1:] or ["no output"])[0]


class Streams:
    """The streams' manypy-perf processes and their window logs."""

    def __init__(self, args, streams, ports, perf, scratch):
        self.procs = []
        for i, s in enumerate(streams):
            log = os.path.join(scratch, f"stream{i}.jsonl")
            out = os.path.join(scratch, f"stream{i}.json")
            err = open(os.path.join(scratch, f"stream{i}.err"), "w+")
            proc = subprocess.Popen(perf_command(perf, s, ports[s["protocol"]], args, log, out),
                                    stdout=subprocess.DEVNULL, stderr=err, text=True)
            self.procs.append((s, log, err, proc))

    def window(self, index, wait_seconds):
        """Each stream's figures for window `index` (from 0), waiting up to
        `wait_seconds` for its line; a perf_error where there is none."""
        deadline = time.monotonic() + wait_seconds
        figures = {}
        keys = ("requests", "successes", "errors", "errors_by_code", "error_messages",
                "requests_per_s", "p50_ms", "p90_ms", "p95_ms", "p99_ms", "avg_ms")
        for s, log, err, proc in self.procs:
            name = f"{s['model']}/{s['protocol']}"
            while True:
                lines = open(log).read().splitlines() if os.path.exists(log) else []
                if len(lines) > index or proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            if len(lines) > index:
                record = json.loads(lines[index])
                figures[name] = dict({k: record.get(k) for k in keys}, rate=s["rate"])
            else:
                state = "running" if proc.poll() is None else f"exit {proc.returncode}"
                figures[name] = {"perf_error": f"no window {index + 1} ({state}): {last_line(err)}",
                                 "rate": s["rate"]}
        return figures

    def finish(self, timeout):
        """Waits for every manypy-perf to exit; {stream: "exit N: last line"} of those
        that failed (killed if still running after `timeout`)."""
        failed = {}
        for s, _, err, proc in self.procs:
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            if code != 0:
                failed[f"{s['model']}/{s['protocol']}"] = f"exit {code}: {last_line(err)}"
            err.close()
        return failed


def run_window(index, args, streams, server, start):
    """One window (`start`: when the streams' first window began): reload
    rounds at the same offsets in every window, then /proc and the streams'
    figures."""
    begin = start + index * args.window_seconds
    cpu_before = cpu_seconds(server.pid)
    reloads = []
    rounds = max(1, int(args.window_seconds // args.reload_seconds))
    for k in range(rounds):
        offset = (k + 0.5) * args.window_seconds / rounds
        time.sleep(max(0.0, begin + offset - time.monotonic()))
        reloads += reload_all(args.http_port, args.reload_models)
    time.sleep(max(0.0, begin + args.window_seconds - time.monotonic()))
    seconds = time.monotonic() - begin
    record = {"index": index + 1, "warmup": index < args.warmup_windows,
              "seconds": round(seconds, 2), "rss_kib": rss_kib(server.pid),
              "server_cpu_percent": round(100 * (cpu_seconds(server.pid) - cpu_before) / seconds,
                                          1),
              "reloads": reloads}
    # A window's line comes a moment after it closes (and a request then in
    # flight may finish first); allow for that, not for a stuck stream.
    record["streams"] = streams.window(index, wait_seconds=10 + args.window_seconds / 2)
    return record


def print_window(w):
    worst = max((s.get("p99_ms") or 0, n) for n, s in w["streams"].items())
    errors = sum(s.get("errors") or 0 for s in w["streams"].values())
    bad = [n for n, s in w["streams"].items() if s.get("perf_error")]
    reloads = ", ".join(f"{r['model']} {r['seconds']:.2f}s{'' if r['ok'] else ' FAILED'}"
                        for r in w["reloads"])
    print(f"window {w['index']}{' (warm-up)' if w['warmup'] else ''}: RSS {w['rss_kib'] / 1024:.1f} "
          f"MiB, server CPU {w['server_cpu_percent']}%, errors {errors}, worst p99 "
          f"{worst[0]:.2f} ms ({worst[1]}), reloads: {reloads}"
          f"{'; perf failed: ' + ', '.join(bad) if bad else ''}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--repository", default="build/model-repository")
    parser.add_argument("--out", default="bench-results/soak.json")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--window-seconds", type=float,
                        help="default: 30 for runs of 5 minutes or more, else 10")
    parser.add_argument("--warmup-windows", type=int,
                        help="default: the first 10%% of the windows, at least one")
    parser.add_argument("--interpreters", type=int, default=2)
    parser.add_argument("--stream", type=parse_stream, action="append",
                        help=f"MODEL:grpc|http:RATE, repeatable (default {' '.join(DEFAULT_STREAMS)})")
    parser.add_argument("--reload", metavar="MODELS",
                        help="comma-separated models reloaded halfway through every window "
                             "(default: every streamed model; 'none': no reloads)")
    parser.add_argument("--reload-seconds", type=float, default=10,
                        help="one reload round per this many seconds of each window (default 10)")
    parser.add_argument("--distribution", choices=["poisson", "constant"], default="poisson",
                        help="arrivals within each stream (default poisson)")
    parser.add_argument("--max-rss-growth", type=float, default=0.05)
    parser.add_argument("--p99-max-growth-per-hour", type=float, default=1.0,
                        help="p99 may rise this fraction of its median an hour (default 1.0: "
                             "doubling in an hour fails)")
    parser.add_argument("--rss-max-growth-per-hour", type=float, default=0.10,
                        help="resident memory may rise this fraction an hour (default 0.10)")
    parser.add_argument("--min-p99-samples", type=int, default=100)
    args = parser.parse_args()
    streams = args.stream or [parse_stream(s) for s in DEFAULT_STREAMS]
    if args.window_seconds is None:
        args.window_seconds = 30.0 if args.minutes >= 5 else 10.0
    windows_total = args.windows_total = max(1, round(args.minutes * 60 / args.window_seconds))
    if args.warmup_windows is None:
        args.warmup_windows = max(1, round(windows_total / 10))
    if windows_total < args.warmup_windows + 2:  # a trend needs windows past warm-up
        parser.error(f"--minutes {args.minutes:g} gives {windows_total} window(s) of "
                     f"{args.window_seconds:g} s: fewer than two after {args.warmup_windows} warm-up")
    served = sorted({s["model"] for s in streams})
    args.reload_models = (served if args.reload is None else
                          [] if args.reload == "none" else args.reload.split(","))
    if set(args.reload_models) - set(served):
        parser.error(f"--reload {args.reload}: only streamed models are loaded ({served})")

    binary = os.path.join(args.build, "bin", "manypy-server")
    perf = os.path.join(args.build, "bin", "manypy-perf")
    started = time.monotonic()
    server, ports = start_manypy(binary, args.repository, served, args.interpreters)
    ready_seconds = time.monotonic() - started
    windows, server_exit = [], None
    try:
        counts_before = server_counts(ports["http"])
        args.http_port = ports["http"]
        with tempfile.TemporaryDirectory() as scratch:
            load = Streams(args, streams, ports, perf, scratch)
            start = time.monotonic() + PERF_WARMUP_SECONDS
            finished = False
            try:
                for i in range(windows_total):
                    windows.append(run_window(i, args, load, server, start))
                    print_window(windows[-1])
                    if server.poll() is not None:
                        break
                finished = True
            finally:
                # Each stream ends by itself after its last window; all are
                # stopped at once if the server has gone or the soak failed.
                alive = finished and server.poll() is None
                for name, why in load.finish(timeout=60 if alive else 0).items():
                    if windows:
                        windows[-1]["streams"].setdefault(name, {})["perf_error"] = why
        counts_after = server_counts(ports["http"]) if server.poll() is None else counts_before
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        code = server.wait(timeout=120)
        server_exit = code if code != 0 else None
    server_failures = sum(counts_after.get(m, (0, 0))[1] - counts_before.get(m, (0, 0))[1]
                          for m in served)
    verdicts = {"errors": errors_verdict(windows, server_failures, server_exit),
                "rss": rss_verdict(windows, args.warmup_windows, args.max_rss_growth),
                "rss_trend": rss_trend_verdict(windows, args.warmup_windows, args.window_seconds,
                                               args.rss_max_growth_per_hour),
                "p99": p99_trend_verdict(windows, args.warmup_windows, args.window_seconds,
                                         args.p99_max_growth_per_hour, args.min_p99_samples)}
    passed = all(v["passed"] for v in verdicts.values())
    result = {"passed": passed, "verdicts": verdicts,
              "config": {"minutes": args.minutes, "window_seconds": args.window_seconds,
                         "warmup_windows": args.warmup_windows, "interpreters": args.interpreters,
                         "p99_max_growth_per_hour": args.p99_max_growth_per_hour,
                         "rss_max_growth_per_hour": args.rss_max_growth_per_hour,
                         "streams": streams, "reloaded": args.reload_models,
                         "reload_rounds_per_window": max(1, int(args.window_seconds //
                                                                args.reload_seconds)),
                         "cpus": os.cpu_count(), "load_average_at_end": os.getloadavg()},
                "server": {"seconds_to_ready": round(ready_seconds, 1),
                           "counts_before": counts_before, "counts_after": counts_after},
                "windows": windows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    for name, v in verdicts.items():
        print(f"{name}: {'PASS' if v['passed'] else 'FAIL'} "
              f"{json.dumps({k: x for k, x in v.items() if k not in ('streams', 'passed')})}")
    for name, s in verdicts["p99"]["streams"].items():
        interval = (f"{s['growth_per_hour']:+.0%}/h, 90% interval [{s['lower_per_hour']:+.0%}, "
                    f"{s['upper_per_hour']:+.0%}] around {s['level']} ms"
                    if "growth_per_hour" in s else s.get("why", ""))
        print(f"  p99 {name}: {s['verdict']} ({interval}; limit {s['limit_per_hour']:+.0%}/h)")
    print(f"soak {'passed' if passed else 'FAILED'}; figures in {args.out}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
