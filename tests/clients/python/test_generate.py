"""Streaming calls of manypy.client against the real server's streaming test
models (tests/server/models/streaming_models.py): InferenceClient.generate_stream
(gRPC ModelStreamInfer), HttpInferenceClient.generate / generate_stream
(server-sent events), and `manypy-client generate`."""
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

from test_client import REPOSITORY, ServerProcess, _cli_env
from manypy.client import HttpInferenceClient, InferenceClient, InferenceServerError


def ticker(count, delay_ms=0, size=1, marker=""):
    return {"COUNT": np.array([count]), "DELAY_MS": np.array([delay_ms]), "SIZE": np.array([size]),
            "MARKER": np.array([marker.encode()], dtype=object)}


class GenerateTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(extra_args=("--no-metrics",),
                                   repository=os.path.join(REPOSITORY, "streaming"),
                                   load=("ticker", "raises_after_three"))
        cls.grpc = InferenceClient(cls.server.address, timeout=30)
        cls.http = HttpInferenceClient(cls.server.http_address, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.grpc.close()
        cls.http.close()
        cls.server.stop_expecting_clean_exit()

    def test_grpc_yields_each_response_then_stops_at_the_final_flag(self):
        results = list(self.grpc.generate_stream("ticker", ticker(4, size=2)))
        self.assertEqual([int(r.as_numpy("INDEX")[0]) for r in results], [0, 1, 2, 3])
        self.assertEqual(results[0].as_numpy("DATA").tolist(), [0.0, 0.0])

    def test_grpc_error_mid_stream_raises_after_the_responses_before_it(self):
        got = []
        with self.assertRaises(InferenceServerError) as caught:
            for r in self.grpc.generate_stream("raises_after_three",
                                               {"INPUT__0": np.array([1.0], np.float32)}):
                got.append(float(r.as_numpy("OUTPUT__0")[0]))
        self.assertEqual(got, [1.0, 2.0, 3.0])
        self.assertEqual(caught.exception.status_code, "INTERNAL")
        self.assertIn("the fourth response cannot be made", caught.exception.message)

    def test_closing_the_stream_early_closes_the_models_generator(self):
        with tempfile.TemporaryDirectory() as tmp:
            marker = os.path.join(tmp, "marker")
            stream = self.grpc.generate_stream("ticker", ticker(100000, delay_ms=10, marker=marker))
            next(stream)
            next(stream)
            stream.close()
            deadline = time.monotonic() + 10
            text = ""
            while time.monotonic() < deadline and "closed" not in text:
                time.sleep(0.01)
                with open(marker) as f:
                    text = f.read()
            self.assertIn("closed", text)

    def test_http_generate_stream_and_generate(self):
        events = list(self.http.generate_stream(
            "ticker", {"COUNT": 3, "DELAY_MS": 0, "SIZE": 1, "MARKER": ""}))
        self.assertEqual([e["INDEX"] for e in events], [0, 1, 2])
        self.assertEqual(events[0]["model_name"], "ticker")
        one = self.http.generate("ticker", {"COUNT": 1, "DELAY_MS": 0, "SIZE": 2, "MARKER": ""})
        self.assertEqual(one["DATA"], [0.0, 0.0])
        with self.assertRaises(InferenceServerError) as caught:
            self.http.generate("ticker", {"COUNT": 2, "DELAY_MS": 0, "SIZE": 1, "MARKER": ""})
        self.assertEqual(caught.exception.status_code, "INVALID_ARGUMENT")
        self.assertIn("generate_stream", caught.exception.message)
        with self.assertRaises(InferenceServerError) as caught:
            list(self.http.generate_stream("raises_after_three", {"INPUT__0": [1.0]}))
        self.assertIn("the fourth response cannot be made", caught.exception.message)

    def test_cli_generate_prints_each_response(self):
        done = subprocess.run(
            [sys.executable, "-m", "manypy.client.cli", "-u", self.server.address, "--timeout", "60",
             "generate", "ticker", "-i", "COUNT=3", "-i", "DELAY_MS=0", "-i", "SIZE=1",
             "-i", 'MARKER=""', "--json"],
            capture_output=True, text=True, env=_cli_env(), timeout=120)
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = done.stdout.strip().splitlines()
        self.assertEqual(lines, ['{"INDEX": [0], "DATA": [0.0]}', '{"INDEX": [1], "DATA": [0.0]}',
                                 '{"INDEX": [2], "DATA": [0.0]}'])
        self.assertIn("(3 responses)", done.stderr)


if __name__ == "__main__":
    unittest.main()
