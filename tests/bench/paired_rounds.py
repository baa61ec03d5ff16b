"""Verdicts from paired rounds: the two sides of a comparison measured in
alternated rounds, the per-round ratios' median with a bootstrap 90%
interval, and "holds" / "misses" / "inconclusive" against a target, so that
a noisy machine widens an interval but cannot flip a verdict."""
import random
import statistics


def bootstrap_interval(values, confidence=0.90, resamples=2000, seed=1):
    """(low, high): the percentile bootstrap interval of the median of `values`."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (float("nan"), float("nan"))
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values)))
                     for _ in range(resamples))
    tail = (1 - confidence) / 2
    return medians[int(tail * resamples)], medians[min(resamples - 1, int((1 - tail) * resamples))]


def verdict(ratios, target, higher_is_better):
    """{"median", "interval", "target", "verdict"} for per-round `ratios`."""
    low, high = bootstrap_interval(ratios)
    if higher_is_better:
        v = "holds" if low >= target else "misses" if high < target else "inconclusive"
    else:
        v = "holds" if high <= target else "misses" if low > target else "inconclusive"
    return {"median": statistics.median(ratios), "interval": [low, high], "target": target,
            "higher_is_better": higher_is_better, "rounds": len(ratios), "verdict": v}


def write_verdicts(result, out):
    """Writes `result` (with its "targets": verdict() dicts, each naming its
    "model" and "ratio") to the JSON file `out`, prints one line a target;
    returns whether any target misses."""
    import json
    import os
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)
    for t in result["targets"]:
        interval = t.get("interval")
        shown = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
        print(f"{t['model']} {t['ratio']}: {t['median']:.2f}{shown} (target "
              f"{'>=' if t['higher_is_better'] else '<='} {t['target']}): {t['verdict']}")
    print(f"wrote {out}")
    return any(t["verdict"] == "misses" for t in result["targets"])
