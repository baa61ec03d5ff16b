"""The soak's three verdicts (tests/bench/soak.py), as pure functions of its
per-window figures, so that tests/bench/soak_verdicts_test.py can show that
each one fails on the regression it is there to catch.

A window is a dict: {"index", "warmup" (bool), "rss_kib", "reloads": [{"model",
"ok", "error"}], "streams": {"MODEL/PROTOCOL": {"requests", "errors",
"errors_by_code", "p99_ms", "perf_error"}}}. The first `warmup_windows`
windows are warm-up: their errors count, their latency and memory do not.
"""


def errors_verdict(windows, server_failures, server_exit=None):
    """Every request, reload and load-generator run must succeed: nothing is
    an expected error. `server_failures` are the failed requests the server's
    own statistics counted (they include requests in flight at a window's
    edge, which no manypy-perf window measures)."""
    by_kind = {"requests": 0, "reloads": 0, "perf_runs": 0,
               "server_counted_failures": server_failures,
               "server_exited": 0 if server_exit is None else 1}
    details = []
    for w in windows:
        for name, s in w["streams"].items():
            by_kind["requests"] += s.get("errors", 0)
            if s.get("errors"):
                details.append(f"window {w['index']} {name}: {s['errors_by_code']}")
            if s.get("perf_error"):
                by_kind["perf_runs"] += 1
                details.append(f"window {w['index']} {name}: manypy-perf: {s['perf_error']}")
        for r in w["reloads"]:
            if not r["ok"]:
                by_kind["reloads"] += 1
                details.append(f"window {w['index']} reload {r['model']}: {r['error']}")
    if server_exit is not None:
        details.append(f"manypy-server exited with status {server_exit}")
    total = sum(by_kind.values())
    return {"passed": total == 0, "unexpected_errors": total, "by_kind": by_kind,
            "details": details[:20]}


def judged(windows, warmup_windows):
    """The windows after warm-up (at least one is needed)."""
    rest = windows[warmup_windows:]
    if not rest:
        raise ValueError(f"{len(windows)} window(s) and {warmup_windows} warm-up window(s): "
                         "nothing left to judge; run longer or with shorter windows")
    return rest


def rss_verdict(windows, warmup_windows, max_growth):
    """Resident memory at the end of the last window against the end of the
    warm-up (models loaded, reloaded once, every connection kind made)."""
    baseline = windows[warmup_windows - 1]["rss_kib"] if warmup_windows else windows[0]["rss_kib"]
    last = judged(windows, warmup_windows)[-1]["rss_kib"]
    growth = (last - baseline) / baseline
    return {"passed": growth < max_growth, "baseline_kib": baseline, "last_kib": last,
            "peak_kib": max(w["rss_kib"] for w in windows), "growth": round(growth, 4),
            "limit": max_growth}


def p99_verdict(windows, warmup_windows, ratio, slack_ms, min_samples, worst_factor=0):
    """Per stream (model x protocol): p99 of the last window <= ratio x the
    first judged window's + slack_ms. Models differ 100-fold in latency, so
    one percentile over all would only watch the slowest. A stream with fewer
    than `min_samples` requests in either window is reported, not judged:
    its "p99" would be its maximum, one request's bad luck. With
    `worst_factor`, a stream fails only if its last p99 is also above
    worst_factor x the worst judged window before it: a blow-up, not one
    window as noisy as the neighbours' load has made the others."""
    rest = judged(windows, warmup_windows)
    first, last = rest[0], rest[-1]
    streams, failed = {}, []
    for name, a in first["streams"].items():
        b = last["streams"].get(name)
        if b is None or a.get("perf_error") or b.get("perf_error"):
            streams[name] = {"judged": False, "why": "no figures (manypy-perf failed)"}
            continue
        entry = {"first_p99_ms": a["p99_ms"], "last_p99_ms": b["p99_ms"],
                 "ratio": round(b["p99_ms"] / a["p99_ms"], 3) if a["p99_ms"] else None,
                 "limit_ms": round(ratio * a["p99_ms"] + slack_ms, 3),
                 "samples": [a["requests"], b["requests"]]}
        if worst_factor and len(rest) > 2:
            earlier = [w["streams"][name]["p99_ms"] for w in rest[:-1]
                       if w["streams"].get(name, {}).get("p99_ms") is not None]
            entry["worst_earlier_p99_ms"] = max(earlier)
        if min(a["requests"], b["requests"]) < min_samples:
            entry.update(judged=False, why=f"fewer than {min_samples} requests in a window")
        else:
            within = b["p99_ms"] <= entry["limit_ms"]
            if "worst_earlier_p99_ms" in entry:
                within = within or b["p99_ms"] <= worst_factor * entry["worst_earlier_p99_ms"]
            entry.update(judged=True, passed=within)
            if not entry["passed"]:
                failed.append(name)
        streams[name] = entry
    any_judged = any(s["judged"] for s in streams.values())
    return {"passed": any_judged and not failed, "failed_streams": failed,
            "first_window": first["index"], "last_window": last["index"], "ratio": ratio,
            "slack_ms": slack_ms, "min_samples": min_samples, "worst_factor": worst_factor,
            "streams": streams,
            **({} if any_judged else {"why": "no stream had enough requests to judge"})}
