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
