"""manypy.client.HttpInferenceClient against the real manypy-server's HTTP
endpoint: the same API and the same results as the gRPC InferenceClient
(binary data and JSON), and the same errors."""
import threading
import unittest

import numpy as np

from test_client import ServerProcess
from manypy.client import (DATATYPES, HttpInferenceClient, InferenceClient,  # noqa: E402
                           InferenceServerError, float32_to_bf16)


class HttpClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(extra_args=("--no-metrics",))
        cls.http = HttpInferenceClient(cls.server.http_address, timeout=30)
        cls.grpc = InferenceClient(cls.server.address, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.http.close()
        cls.grpc.close()
        cls.server.stop_expecting_clean_exit()

    def two_io(self):
        return {"INPUT_A": np.array([1, 2, 3, 4], np.float32),
                "INPUT_B": np.array([10, 20, 30, 40], np.int64)}

    def test_health_and_metadata_match_grpc(self):
        self.assertTrue(self.http.is_server_live())
        self.assertTrue(self.http.is_server_ready())
        self.assertTrue(self.http.is_model_ready("two_io"))
        self.assertFalse(self.http.is_model_ready("nope"))
        self.assertEqual(self.http.server_metadata()["name"], "manypy")
        h, g = self.http.model_metadata("two_io"), self.grpc.model_metadata("two_io")
        self.assertEqual(h["inputs"], g["inputs"])
        self.assertEqual(h["outputs"], g["outputs"])
        self.assertEqual(self.http.model_config("two_io")["name"], "two_io")
        names = {m["name"] for m in self.http.repository_index(ready=True)}
        self.assertEqual(names, {"two_io", "echo_all", "failing"})
        self.assertIn("model_stats", self.http.model_statistics("two_io"))

    def test_infer_binary_and_json_equal_grpc(self):
        expected = self.grpc.infer("two_io", self.two_io())
        for binary in (True, False):
            for binary_outputs in (True, False):
                r = self.http.infer("two_io", self.two_io(), request_id="r1", binary=binary,
                                    binary_outputs=binary_outputs)
                self.assertEqual(r.id, "r1")
                np.testing.assert_array_equal(r.as_numpy("SUM"), expected.as_numpy("SUM"))
                np.testing.assert_array_equal(r.as_numpy("PRODUCT"), expected.as_numpy("PRODUCT"))
        r = self.http.infer("two_io", self.two_io(), outputs=["PRODUCT"])
        self.assertEqual(list(r.outputs), ["PRODUCT"])

    def test_every_datatype_round_trips(self):
        inputs = {}
        for dt in DATATYPES:
            if dt == "BYTES":
                inputs["IN_BYTES"] = np.array([b"ab", b"c"], dtype=object)
            elif dt == "BF16":
                inputs["IN_BF16"] = (float32_to_bf16(np.array([1.5, -2], np.float32)), "BF16")
            elif dt == "BOOL":
                inputs["IN_BOOL"] = np.array([True, False])
            else:
                inputs[f"IN_{dt}"] = np.array([1, 2], dtype=np.dtype(dt.lower().replace("fp", "float")))
        for binary in (True, False):
            r = self.http.infer("echo_all", inputs, binary=binary, binary_outputs=binary)
            for name, value in inputs.items():
                array = value[0] if isinstance(value, tuple) else value
                np.testing.assert_array_equal(r.as_numpy("OUT_" + name[3:]), array)

    def test_errors_carry_grpc_code_names(self):
        with self.assertRaises(InferenceServerError) as e:
            self.http.infer("nope", self.two_io())
        self.assertEqual(e.exception.status_code, "NOT_FOUND")
        with self.assertRaises(InferenceServerError) as e:
            self.http.infer("failing", {"INPUT__0": np.array([-1], np.float32)})
        self.assertEqual(e.exception.status_code, "INTERNAL")
        self.assertIn("negative input is not allowed", e.exception.message)
        bad = {"INPUT_A": np.array([1, 2, 3], np.float32), "INPUT_B": np.arange(3)}
        with self.assertRaises(InferenceServerError) as g:
            self.grpc.infer("two_io", bad)
        with self.assertRaises(InferenceServerError) as h:
            self.http.infer("two_io", bad)
        self.assertEqual(h.exception.status_code, "INVALID_ARGUMENT")
        self.assertEqual(h.exception.message, g.exception.message)

    def test_threads_share_a_client(self):
        errors = []

        def work():
            try:
                for _ in range(10):
                    r = self.http.infer("two_io", self.two_io())
                    np.testing.assert_array_equal(r.as_numpy("SUM"), [11, 22, 33, 44])
            except Exception as e:  # reported in the main thread
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_repository_load_unload(self):
        self.http.unload_model("failing")
        self.assertFalse(self.http.is_model_ready("failing"))
        self.http.load_model("failing")
        self.assertTrue(self.http.is_model_ready("failing"))


if __name__ == "__main__":
    unittest.main()
