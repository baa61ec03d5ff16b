#!/usr/bin/python3
"""Each soak verdict (soak_verdicts.py) passes a steady run and fails the
regression it is there to catch: an error anywhere, a leak, a latency blow-up."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from soak_verdicts import errors_verdict, p99_verdict, rss_verdict  # noqa: E402


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


class P99VerdictTest(unittest.TestCase):
    def test_within_the_ratio_passes(self):
        windows = steady()
        windows[-1] = window(6, p99_ms=2.4)
        self.assertTrue(p99_verdict(windows, 1, 1.2, 0, 100)["passed"])

    def test_a_blow_up_fails_and_names_the_stream(self):
        windows = steady()
        windows[-1] = window(6, p99_ms=2.5)
        v = p99_verdict(windows, 1, 1.2, 0, 100)
        self.assertFalse(v["passed"])
        self.assertEqual(v["failed_streams"], ["two_io/grpc", "two_io/http"])
        windows[-1] = window(6, p99_ms=300.0)
        self.assertFalse(p99_verdict(windows, 1, 3.0, 50, 100)["passed"])

    def test_slack_absorbs_small_absolute_noise(self):
        windows = steady()
        windows[-1] = window(6, p99_ms=9.0)
        self.assertTrue(p99_verdict(windows, 1, 1.2, 10, 100)["passed"])

    def test_the_warm_up_window_is_not_the_reference(self):
        windows = steady()
        windows[0] = window(1, p99_ms=50.0)  # cold: far slower than the rest
        windows[-1] = window(6, p99_ms=9.0)
        self.assertFalse(p99_verdict(windows, 1, 1.2, 0, 100)["passed"])

    def test_with_worst_factor_one_noisy_window_like_the_others_passes(self):
        windows = steady()
        windows[2] = window(3, p99_ms=30.0)  # the neighbours compiled during window 3
        windows[-1] = window(6, p99_ms=40.0)
        self.assertFalse(p99_verdict(windows, 1, 2, 0, 100)["passed"])
        v = p99_verdict(windows, 1, 2, 0, 100, worst_factor=2)
        self.assertTrue(v["passed"])
        self.assertEqual(v["streams"]["two_io/grpc"]["worst_earlier_p99_ms"], 30.0)

    def test_with_worst_factor_a_blow_up_beyond_every_window_fails(self):
        windows = steady()
        windows[2] = window(3, p99_ms=30.0)
        windows[-1] = window(6, p99_ms=61.0)
        self.assertFalse(p99_verdict(windows, 1, 2, 0, 100, worst_factor=2)["passed"])

    def test_streams_with_too_few_samples_are_not_judged(self):
        windows = steady()
        windows[-1] = window(6, p99_ms=90.0, requests=20)
        v = p99_verdict(windows, 1, 1.2, 0, 100)
        self.assertFalse(v["streams"]["two_io/grpc"]["judged"])
        self.assertFalse(v["passed"])  # nothing judged is no pass
        self.assertIn("why", v)


if __name__ == "__main__":
    unittest.main()
