"""manypy.infer / submit / request / log / metrics / trace outside the server
(manypy/serving.py): a model that uses them imports and runs, with the
server's checks."""
import logging
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "package_format", "python"))

import manypy  # noqa: E402


class StandInTest(unittest.TestCase):
    def test_infer_outside_the_server_raises_saying_why(self):
        with self.assertRaises(manypy.InferenceError) as caught:
            manypy.infer("detector", {"INPUT__0": [b"x"]})
        self.assertEqual(caught.exception.status, "UNAVAILABLE")
        self.assertIn("outside it (packaging, an eager test) there is no other model",
                      caught.exception.message)
        self.assertTrue(manypy.submit("detector", {}).done())

    def test_request_and_log(self):
        self.assertEqual(manypy.request.parameters, {})
        self.assertIsNone(manypy.request.seconds_left)
        self.assertFalse(manypy.request.client_left)
        with self.assertLogs("manypy.model", logging.INFO) as logs:
            manypy.log.info("hello", answer=42)
        self.assertEqual(logs.records[0].getMessage(), "hello answer=42")

    def test_trace_records_nothing_and_lets_exceptions_through(self):
        self.assertIsNone(manypy.request.trace_id)
        with manypy.trace.span("step", rows=2) as span:
            span.set_attribute("more", 1)
        manypy.trace.set_attribute("key", "value")
        with self.assertRaises(ValueError):
            with manypy.trace.span("fails"):
                raise ValueError("goes on")

    def test_metrics_keep_their_values_and_are_checked_as_the_servers(self):
        calls = manypy.metrics.counter("stand_in_calls_total", "calls", labels=["mode"])
        calls.labels(mode="a").inc()
        calls.labels("a").inc(2)
        self.assertEqual(calls.value("a"), 3)
        self.assertIs(manypy.metrics.counter("stand_in_calls_total", "calls", labels=["mode"]), calls)
        with self.assertRaisesRegex(ValueError, "declared already as a counter"):
            manypy.metrics.gauge("stand_in_calls_total", "again", labels=["mode"])
        with self.assertRaisesRegex(ValueError, "is not"):
            manypy.metrics.counter("bad name", "x")
        with self.assertRaisesRegex(ValueError, "not allowed"):
            manypy.metrics.counter("stand_in_other", "x", labels=["model"])
        with self.assertRaisesRegex(ValueError, "cannot go down"):
            calls.labels("a").inc(-1)
        with self.assertRaisesRegex(ValueError, "call .labels"):
            calls.inc()


if __name__ == "__main__":
    unittest.main()
