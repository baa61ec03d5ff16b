#!/usr/bin/python3
"""Each soak verdict (soak_verdicts.py) passes a steady run and fails the
regression it is there to catch: an error anywhere, a leak, latency that
rises over the run; a noisy or short run is inconclusive, not failed."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import random  # noqa: E402

from soak_verdicts import (errors_verdict, p99_trend_verdict, rss_trend_verdict,  # noqa: E402
                           rss_verdict, theil_sen)


def window(index, rss_kib=400_000, p99_ms=2.0, requests=200, errors=0, reload_ok=True):
    stream = {"requests": requests, "errors": errors,
              "errors_by_code": {"UNAVAILABLE": errors} if errors else {}, "p99_ms": p99_ms}
    return {"index": index, "warmup": index == 1, "rss_kib": rss_kib,
            "reloads": [{"model": "two_io", "ok": reload_ok,
                         **({} if reload_ok else {"error": "HTTP Error 500"})}],
            "streams": {"two_io/grpc": stream, "two_io/http": dict(stream)}}


def steady(n=6):
    return [window(i + 1) for i in range(n)]


class ErrorsVerdictTest(unittest.TestCase):
    def test_a_steady_run_passes(self):
        self.assertTrue(errors_verdict(steady(), 0)["passed"])

    def test_one_failed_request_even_in_warm_up_fails(self):
        windows = steady()
        windows[0] = window(1, errors=1)
        v = errors_verdict(windows, 0)
        self.assertFalse(v["passed"])
        self.assertEqual(v["by_kind"]["requests"], 2)  # both streams of window 1
        self.assertIn("window 1 two_io/grpc: {'UNAVAILABLE': 1}", v["details"])

    def test_failures_only_the_server_counted_fail(self):
        self.assertFalse(errors_verdict(steady(), 3)["passed"])

    def test_a_failed_reload_fails(self):
        windows = steady()
        windows[3] = window(4, reload_ok=False)
        v = errors_verdict(windows, 0)
        self.assertEqual(v["by_kind"]["reloads"], 1)
        self.assertFalse(v["passed"])

    def test_a_failed_load_generator_or_server_exit_fails(self):
        windows = steady()
        windows[2]["streams"]["two_io/http"] = {"perf_error": "exit 1: connection refused"}
        self.assertFalse(errors_verdict(windows, 0)["passed"])
        self.assertFalse(errors_verdict(steady(), 0, server_exit=-11)["passed"])


class RssVerdictTest(unittest.TestCase):
    def test_growth_is_measured_from_the_end_of_warm_up(self):
        windows = steady()
        windows[0]["rss_kib"] = 300_000  # still settling: a second warm-up window is needed
        v = rss_verdict(windows, 2, 0.05)
        self.assertTrue(v["passed"])
        self.assertEqual(v["growth"], 0.0)
        self.assertFalse(rss_verdict(windows, 1, 0.05)["passed"])

    def test_a_leak_of_six_percent_fails_and_four_passes(self):
        windows = steady()
        windows[-1]["rss_kib"] = 424_000
        self.assertFalse(rss_verdict(windows, 1, 0.05)["passed"])
        windows[-1]["rss_kib"] = 416_000
        self.assertTrue(rss_verdict(windows, 1, 0.05)["passed"])

    def test_nothing_after_warm_up_is_an_error(self):
        with self.assertRaises(ValueError):
            rss_verdict(steady(1), 1, 0.05)


def series(n, p99, rss=lambda i: 400_000, seed=1):
    """n windows whose p99 (ms) and RSS (KiB) follow p99(i, rng) and rss(i)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        w = window(i + 1, rss_kib=rss(i))
        for name in w["streams"]:
            w["streams"][name] = dict(w["streams"][name], p99_ms=p99(i, rng))
        out.append(w)
    return out


class TheilSenTest(unittest.TestCase):
    def test_a_line_gives_its_slope_and_an_interval_around_it(self):
        slope, lower, upper = theil_sen(list(range(10)), [3 * x + 1 for x in range(10)])
        self.assertEqual((slope, lower, upper), (3, 3, 3))

    def test_one_wild_point_does_not_tilt_it(self):
        ys = [2.0] * 12
        ys[6] = 50.0  # one window as slow as a busy neighbour makes it
        slope, lower, upper = theil_sen(list(range(12)), ys)
        self.assertEqual(slope, 0)
        self.assertLessEqual(lower, 0)
        self.assertGreaterEqual(upper, 0)

    def test_too_few_points_leave_the_interval_open(self):
        _, lower, upper = theil_sen([0, 1, 2], [1.0, 2.0, 3.0])
        self.assertEqual((lower, upper), (float("-inf"), float("inf")))


class TrendVerdictTest(unittest.TestCase):
    # An hour of 60-s windows, p99 scattered +-40% around 2 ms (the swing a
    # noisy 2-core machine gives): flat, so it holds within +100%/h.
    def test_a_flat_noisy_series_holds(self):
        windows = series(61, lambda i, rng: 2.0 * rng.uniform(0.6, 1.4))
        v = p99_trend_verdict(windows, 1, 60, max_growth_per_hour=1.0, min_samples=100)
        self.assertTrue(v["passed"], v)
        self.assertEqual(v["verdict"], "holds", v)
        s = v["streams"]["two_io/grpc"]
        self.assertLess(s["lower_per_hour"], 0.0)
        self.assertLess(s["upper_per_hour"], 1.0)

    def test_a_rising_series_fails_through_the_noise(self):
        # 10 minutes of 30-s windows, p99 from 2 ms to 6 ms under the same scatter.
        windows = series(21, lambda i, rng: (2.0 + 0.2 * i) * rng.uniform(0.8, 1.2))
        v = p99_trend_verdict(windows, 1, 30, max_growth_per_hour=1.0, min_samples=100)
        self.assertFalse(v["passed"], v)
        self.assertEqual(v["verdict"], "misses")
        self.assertEqual(v["failed_streams"], ["two_io/grpc", "two_io/http"])
        self.assertGreater(v["streams"]["two_io/grpc"]["lower_per_hour"], 1.0)

    def test_a_short_series_is_inconclusive_and_does_not_fail(self):
        windows = series(4, lambda i, rng: 2.0 + i)
        v = p99_trend_verdict(windows, 1, 30, max_growth_per_hour=1.0, min_samples=100)
        self.assertTrue(v["passed"])
        self.assertEqual(v["verdict"], "inconclusive")
        self.assertIn("fewer than the 5 a trend needs", v["streams"]["two_io/grpc"]["why"])

    def test_a_noisy_ten_minute_series_is_inconclusive_with_its_interval(self):
        # +-50% scatter over 10 minutes: too little time to tell +100%/h from flat.
        windows = series(21, lambda i, rng: 2.0 * rng.uniform(0.5, 1.5), seed=3)
        v = p99_trend_verdict(windows, 1, 30, max_growth_per_hour=1.0, min_samples=100)
        s = v["streams"]["two_io/grpc"]
        self.assertTrue(v["passed"])
        self.assertEqual(v["verdict"], "inconclusive")
        self.assertLess(s["lower_per_hour"], 1.0)
        self.assertGreater(s["upper_per_hour"], 1.0)

    def test_windows_with_too_few_requests_are_left_out(self):
        windows = series(8, lambda i, rng: 2.0)
        for w in windows[2:]:
            for s in w["streams"].values():
                s["requests"] = 10
        v = p99_trend_verdict(windows, 1, 30, max_growth_per_hour=1.0, min_samples=100)
        self.assertEqual(v["streams"]["two_io/grpc"]["windows"], 1)
        self.assertEqual(v["verdict"], "inconclusive")

    def test_a_minute_of_rising_memory_is_inconclusive_not_a_leak(self):
        # soak_60s: caches still fill in the first minutes after warm-up.
        rising = series(7, lambda i, rng: 2.0, rss=lambda i: 374_000 + 3_000 * i)
        v = rss_trend_verdict(rising, 1, 10, 0.10)
        self.assertTrue(v["passed"])
        self.assertEqual(v["verdict"], "inconclusive")
        self.assertIn("less than the 5 a trend needs", v["why"])

    def test_rss_steady_holds_and_a_leak_fails(self):
        steady_rss = series(21, lambda i, rng: 2.0, rss=lambda i: 400_000 + (i % 3) * 500)
        self.assertEqual(rss_trend_verdict(steady_rss, 1, 30, 0.10)["verdict"], "holds")
        leaking = series(21, lambda i, rng: 2.0, rss=lambda i: 400_000 + 4_000 * i)  # 1% a window
        v = rss_trend_verdict(leaking, 1, 30, 0.10)
        self.assertFalse(v["passed"])
        self.assertEqual(v["verdict"], "misses")
        self.assertGreater(v["lower_per_hour"], 0.10)

if __name__ == "__main__":
    unittest.main()
