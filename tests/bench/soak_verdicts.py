"""The soak's verdicts (tests/bench/soak.py), as pure functions of its
per-window figures, so that tests/bench/soak_verdicts_test.py can show that
each one fails on the regression it is there to catch: no errors, RSS growth
end against start, and the trends of p99 and RSS over every window (a slope
with an interval, which a noisy machine widens but cannot tilt).

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


def theil_sen(xs, ys, confidence=0.90):
    """The Theil-Sen slope of ys over xs (the median of every pairwise slope:
    robust to a few wild points) and Sen's distribution-free interval for it
    at `confidence` (ranks of the sorted pairwise slopes from Kendall's tau's
    variance, n(n-1)(2n+5)/18). An end the data cannot bound (too few points
    for the confidence) is -inf or +inf. Returns (slope, lower, upper)."""
    from math import ceil, floor, inf, sqrt
    from statistics import NormalDist, median
    n = len(xs)
    slopes = sorted((ys[j] - ys[i]) / (xs[j] - xs[i])
                    for i in range(n) for j in range(i + 1, n) if xs[j] != xs[i])
    if not slopes:
        return 0.0, -inf, inf
    pairs = len(slopes)
    c = NormalDist().inv_cdf(0.5 + confidence / 2) * sqrt(n * (n - 1) * (2 * n + 5) / 18)
    lower_rank = floor((pairs - c) / 2)  # 1-based rank of the lower end
    upper_rank = ceil((pairs + c) / 2) + 1
    lower = slopes[lower_rank - 1] if lower_rank >= 1 else -inf
    upper = slopes[upper_rank - 1] if upper_rank <= pairs else inf
    return median(slopes), lower, upper


# A trend over less time than this after warm-up is not judged: in the first
# minutes resident memory still grows as the allocator's caches and every
# interpreter's fill (soak_60s, 2026-12-01: +4% in its one judged minute,
# flat after), which a slope per hour would call a leak.
MIN_TREND_HOURS = 5 / 60


def _trend(hours, values, max_growth_per_hour, min_windows, confidence):
    """One series' growth per hour relative to its median level, with its
    interval, and the verdict: "holds" when the whole interval is at or below
    the limit, "misses" when the whole interval is above it, "inconclusive"
    otherwise (or with fewer than `min_windows` points, or spanning less than
    MIN_TREND_HOURS)."""
    from statistics import median
    entry = {"windows": len(values), "limit_per_hour": max_growth_per_hour}
    if len(values) < min_windows:
        return {**entry, "verdict": "inconclusive",
                "why": f"{len(values)} window(s), fewer than the {min_windows} a trend needs"}
    if max(hours) - min(hours) < MIN_TREND_HOURS:
        return {**entry, "verdict": "inconclusive",
                "why": f"{(max(hours) - min(hours)) * 60:.1f} min of windows, less than the "
                       f"{MIN_TREND_HOURS * 60:g} a trend needs"}
    level = median(values)
    slope, lower, upper = theil_sen(hours, values, confidence)
    scale = level if level > 0 else 1.0
    growth = {"growth_per_hour": slope / scale, "lower_per_hour": lower / scale,
              "upper_per_hour": upper / scale}
    if growth["lower_per_hour"] > max_growth_per_hour:
        verdict = "misses"
    elif growth["upper_per_hour"] <= max_growth_per_hour:
        verdict = "holds"
    else:
        verdict = "inconclusive"
    return {**entry, "level": round(level, 3), "confidence": confidence, "verdict": verdict,
            **{k: round(v, 4) if abs(v) != float("inf") else v for k, v in growth.items()}}


def p99_trend_verdict(windows, warmup_windows, window_seconds, max_growth_per_hour,
                      min_samples, min_windows=5, confidence=0.90):
    """Per stream (model x protocol): the slope of p99 over every window after
    warm-up, as growth per hour relative to the stream's median p99, with a
    `confidence` interval (Theil-Sen). A leak or a slow degradation shows as a
    rising line; the machine's speed as scatter around a flat one, which
    widens the interval but does not tilt it. A stream fails only when the
    whole interval is above the limit; windows with fewer than `min_samples`
    requests (whose p99 is one request's luck) are left out."""
    rest = judged(windows, warmup_windows)
    names = sorted({name for w in rest for name in w["streams"]})
    streams, missed = {}, []
    for name in names:
        points = [(w["index"] * window_seconds / 3600, w["streams"][name]["p99_ms"])
                  for w in rest if name in w["streams"] and not w["streams"][name].get("perf_error")
                  and w["streams"][name].get("requests", 0) >= min_samples]
        entry = _trend([x for x, _ in points], [y for _, y in points], max_growth_per_hour,
                       min_windows, confidence)
        streams[name] = entry
        if entry["verdict"] == "misses":
            missed.append(name)
    verdicts = {s["verdict"] for s in streams.values()}
    overall = "misses" if missed else "holds" if verdicts == {"holds"} else "inconclusive"
    return {"passed": not missed, "verdict": overall, "failed_streams": missed,
            "max_growth_per_hour": max_growth_per_hour, "streams": streams}


def rss_trend_verdict(windows, warmup_windows, window_seconds, max_growth_per_hour,
                      min_windows=5, confidence=0.90):
    """Resident memory's slope over the windows after warm-up, as growth per
    hour relative to its median, with its interval: fails only when the whole
    interval is above the limit (a leak), as p99_trend_verdict."""
    rest = judged(windows, warmup_windows)
    entry = _trend([w["index"] * window_seconds / 3600 for w in rest],
                   [w["rss_kib"] for w in rest], max_growth_per_hour, min_windows, confidence)
    return {"passed": entry["verdict"] != "misses", **entry}
