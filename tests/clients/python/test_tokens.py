"""manypy.client with bearer tokens against the real manypy-server started
with --auth-token-file and --management-token-file: the gRPC and HTTP
clients (and the CLI) send `token`, are served with it and refused
(UNAUTHENTICATED / PERMISSION_DENIED) without the right one."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from test_client import ServerProcess
from manypy.client import HttpInferenceClient, InferenceClient, InferenceServerError

INFERENCE_TOKEN = "py-infer-5d2c81e07a"
MANAGEMENT_TOKEN = "py-manage-93be4f1c60"


class TokenClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="manypy_tokens_py_")
        cls.inference_file = os.path.join(cls.dir, "inference.token")
        cls.management_file = os.path.join(cls.dir, "management.token")
        for path, token in ((cls.inference_file, INFERENCE_TOKEN), (cls.management_file, MANAGEMENT_TOKEN)):
            with open(path, "w") as f:
                f.write(token + "\n")
        cls.server = ServerProcess(extra_args=(
            "--no-metrics", f"--auth-token-file={cls.inference_file}",
            f"--management-token-file={cls.management_file}"))

    @classmethod
    def tearDownClass(cls):
        try:
            cls.server.stop_expecting_clean_exit()
        finally:
            shutil.rmtree(cls.dir, ignore_errors=True)

    def two_io(self):
        return {"INPUT_A": np.array([1, 2, 3, 4], np.float32),
                "INPUT_B": np.array([10, 20, 30, 40], np.int64)}

    def clients(self, token):
        return (InferenceClient(self.server.address, timeout=30, token=token),
                HttpInferenceClient(self.server.http_address, timeout=30, token=token))

    def test_the_token_is_sent_over_both_protocols(self):
        for c in self.clients(INFERENCE_TOKEN):
            with self.subTest(type(c).__name__), c:
                r = c.infer("two_io", self.two_io())
                np.testing.assert_array_equal(r.as_numpy("SUM"), np.array([11, 22, 33, 44], np.float32))
                with self.assertRaises(InferenceServerError) as e:
                    c.load_model("two_io")
                self.assertEqual(e.exception.status_code, "PERMISSION_DENIED")
        for c in self.clients(MANAGEMENT_TOKEN):
            with self.subTest(type(c).__name__), c:
                c.load_model("two_io")
                self.assertTrue(c.is_model_ready("two_io"))

    def test_refused_without_the_token(self):
        for token in (None, "wrong"):
            for c in self.clients(token):
                with self.subTest(f"{type(c).__name__} {token}"), c:
                    self.assertTrue(c.is_server_live())  # probes stay open
                    with self.assertRaises(InferenceServerError) as e:
                        c.infer("two_io", self.two_io())
                    self.assertEqual(e.exception.status_code, "UNAUTHENTICATED")

    def test_cli_reads_the_token_file(self):
        cli = [sys.executable, "-m", "manypy.client.cli", "-u", self.server.address]
        ok = subprocess.run(cli + ["--auth-token-file", self.inference_file, "metadata", "two_io"],
                            capture_output=True, text=True, timeout=60)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("INPUT_A", ok.stdout)
        refused = subprocess.run(cli + ["metadata", "two_io"], capture_output=True, text=True, timeout=60)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("UNAUTHENTICATED", refused.stdout + refused.stderr)

    def test_cli_refuses_a_bad_token_file_as_the_server_would(self):
        cli = [sys.executable, "-m", "manypy.client.cli", "-u", self.server.address]
        with tempfile.TemporaryDirectory() as scratch:
            cases = {"two words": ("first second\n", "must hold one token of visible ASCII"),
                     "empty": (" \n", "is empty"),
                     "too large": ("x" * 4097, "is larger than 4096 bytes")}
            for name, (text, why) in cases.items():
                with self.subTest(name):
                    path = os.path.join(scratch, name.replace(" ", "_"))
                    with open(path, "w") as f:
                        f.write(text)
                    run = subprocess.run(cli + ["--auth-token-file", path, "metadata", "two_io"],
                                         capture_output=True, text=True, timeout=60)
                    self.assertEqual(run.returncode, 1, run.stdout)
                    self.assertIn(f"--auth-token-file: the token file {path} {why}", run.stderr)
                    self.assertNotIn("first", run.stderr)


if __name__ == "__main__":
    unittest.main()
