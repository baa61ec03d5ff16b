"""manypy.client and manypy-client against the real manypy-server.

Each test class starts build/bin/manypy-server on a free loopback port
(--grpc-port=0; the port comes from its "listening on 127.0.0.1:PORT," line)
with two_io, echo_all and failing loaded in explicit mode, and stops it with
SIGTERM at the end (exit status 0 expected).

    PYTHONPATH=package_format/python:clients/python:build/python \\
    MANYPY_SERVER_BINARY=build/bin/manypy-server \\
    MANYPY_TEST_REPOSITORY=build/test-model-repository MANYPY_CACHE_DIR=build/test-cache \\
    /usr/bin/python3 -m unittest discover -v -s tests/clients/python -t tests/clients/python

(ctest -R python_client_tests does the same; the repository comes from the
model_repository fixture.)
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
# `manypy` is spread over these two folders (pkgutil.extend_path in both
# manypy/__init__.py); the client is in clients/python.
PACKAGE_DIRS = [os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python")]
sys.path[:0] = [d for d in PACKAGE_DIRS + [os.path.join(REPO, "tests", "test_util")]
                if d not in sys.path]
sys.dont_write_bytecode = True

from manypy_server import SERVER, ManypyServer  # noqa: E402
from manypy.client import (DATATYPES, NUMPY_DTYPES, InferenceClient,  # noqa: E402
                           InferenceServerError, bf16_to_float32, float32_to_bf16)

REPOSITORY = os.environ.get("MANYPY_TEST_REPOSITORY",
                            os.path.join(REPO, "build", "test-model-repository"))
START_TIMEOUT_S = 180


class ServerProcess(ManypyServer):
    """The real server on a free loopback port with `load` loaded in explicit
    mode; .address is gRPC's, .http_address HTTP's."""

    def __init__(self, extra_args=(), repository=REPOSITORY, load=("two_io", "echo_all", "failing")):
        super().__init__(["--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0",
                          "--metrics-port=0", "--interpreters=2", "--model-control-mode=explicit",
                          *[f"--load-model={name}" for name in load],
                          f"--model-repository={repository}", *extra_args],
                         start_timeout_s=START_TIMEOUT_S)
        self.address = self.grpc
        self.http_address = self.http


class ServerTestCase(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess()
        cls.address = cls.server.address

    @classmethod
    def tearDownClass(cls):
        cls.server.stop_expecting_clean_exit()


def _two_io_inputs(n=4):
    return {"INPUT_A": np.array([1, 2, 3, 4][:n], np.float32),
            "INPUT_B": np.array([10, 20, 30, 40][:n], np.int64)}


def _every_datatype():
    """echo_all inputs: one [3] tensor per datatype, with edge values."""
    values = {
        "BOOL": np.array([True, False, True]),
        "UINT8": np.array([0, 1, 255], np.uint8),
        "UINT16": np.array([0, 1, 65535], np.uint16),
        # torch 1.13 has no uint32/uint64: the server maps them to int64 and range-checks back.
        "UINT32": np.array([0, 1, 2**32 - 1], np.uint32),
        "UINT64": np.array([0, 1, 2**63 - 1], np.uint64),
        "INT8": np.array([-128, 0, 127], np.int8),
        "INT16": np.array([-32768, 0, 32767], np.int16),
        "INT32": np.array([-2**31, 0, 2**31 - 1], np.int32),
        "INT64": np.array([-2**63, 0, 2**63 - 1], np.int64),
        "FP16": np.array([1.5, -0.0, 65504], np.float16),
        "BF16": float32_to_bf16(np.array([1.0, -2.5, 3.140625], np.float32)),
        "FP32": np.array([1.5, -2.25, np.inf], np.float32),
        "FP64": np.array([1e300, -2.5, np.nan], np.float64),
        "BYTES": np.array([b"a", b"", b"\xff\x00z"], dtype=object),
    }
    return {f"IN_{dt}": (values[dt], dt) if dt == "BF16" else values[dt] for dt in DATATYPES}, values


class ClientTest(ServerTestCase):

    def setUp(self):
        self.client = InferenceClient(self.address, timeout=30)

    def tearDown(self):
        self.client.close()

    # --- health and metadata ---------------------------------------------------

    def test_health_live_ready(self):
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_server_ready())
        self.assertEqual(self.client.health(), "SERVING")
        self.assertEqual(self.client.health("inference.GRPCInferenceService"), "SERVING")
        self.assertTrue(self.client.is_model_ready("two_io"))
        self.assertTrue(self.client.is_model_ready("two_io", version="1"))
        self.assertTrue(self.client.is_model_ready("echo_all", version=1))
        self.assertFalse(self.client.is_model_ready("resnet50"))

    def test_server_metadata(self):
        meta = self.client.server_metadata()
        self.assertEqual(meta["name"], "manypy")
        self.assertTrue(meta["version"])
        self.assertIn("model_repository", meta["extensions"])

    def test_model_metadata(self):
        meta = self.client.model_metadata("two_io")
        self.assertEqual(meta["name"], "two_io")
        self.assertEqual(meta["versions"], ["1"])
        self.assertEqual([(t["name"], t["datatype"], t["shape"]) for t in meta["inputs"]],
                         [("INPUT_A", "FP32", [4]), ("INPUT_B", "INT64", [4])])
        self.assertEqual([t["name"] for t in meta["outputs"]], ["SUM", "PRODUCT"])
        echo = self.client.model_metadata("echo_all", version="1")
        self.assertEqual([t["datatype"] for t in echo["inputs"]], list(DATATYPES))
        self.assertEqual({tuple(t["shape"]) for t in echo["outputs"]}, {(-1,)})
        with self.assertRaises(InferenceServerError) as caught:
            self.client.model_metadata("no_such_model")
        self.assertEqual(caught.exception.status_code, "NOT_FOUND")
        self.assertIn("no_such_model", caught.exception.message)

    def test_model_config(self):
        config = self.client.model_config("two_io")
        self.assertEqual(config["name"], "two_io")
        self.assertEqual(config["max_batch_size"], 0)
        self.assertEqual(config["input"][0]["name"], "INPUT_A")
        self.assertEqual(config["input"][0]["data_type"], "TYPE_FP32")
        self.assertEqual(config["input"][0]["dims"], [4])
        self.assertEqual(config["input"][1]["data_type"], "TYPE_INT64")
        self.assertEqual([o["name"] for o in config["output"]], ["SUM", "PRODUCT"])
        with self.assertRaises(InferenceServerError) as caught:
            self.client.model_config("no_such_model")
        self.assertEqual(caught.exception.status_code, "NOT_FOUND")

    def test_model_statistics(self):
        before = self.client.model_statistics("failing")["model_stats"][0]
        self.client.infer("failing", {"INPUT__0": np.array([1.0, 2.0], np.float32)})
        with self.assertRaises(InferenceServerError):
            self.client.infer("failing", {"INPUT__0": np.array([-1.0], np.float32)})
        stats = self.client.model_statistics("failing")
        self.assertEqual(len(stats["model_stats"]), 1)
        after = stats["model_stats"][0]
        self.assertEqual(after["name"], "failing")
        self.assertEqual(after["version"], "1")
        inference = after["inference_stats"]
        self.assertIsInstance(inference["success"]["count"], int)
        self.assertEqual(inference["success"]["count"],
                         before["inference_stats"]["success"]["count"] + 1)
        self.assertEqual(inference["fail"]["count"], before["inference_stats"]["fail"]["count"] + 1)
        self.assertGreater(inference["compute_infer"]["ns"], 0)
        self.assertGreater(after["last_inference"], 0)
        every = {s["name"] for s in self.client.model_statistics()["model_stats"]}
        self.assertTrue({"two_io", "echo_all", "failing"} <= every, every)

    def test_repository_index(self):
        index = {m["name"]: m for m in self.client.repository_index()}
        self.assertEqual(index["two_io"]["state"], "READY")
        self.assertEqual(index["two_io"]["version"], "1")
        self.assertEqual(index["resnet50"]["state"], "UNAVAILABLE")
        ready = self.client.repository_index(ready=True)
        self.assertTrue(ready)
        self.assertEqual({m["state"] for m in ready}, {"READY"})
        self.assertIn("echo_all", {m["name"] for m in ready})
        self.assertNotIn("resnet50", {m["name"] for m in ready})

    # --- inference -------------------------------------------------------------

    def _assert_same(self, got, want, datatype):
        self.assertEqual(got.shape, want.shape, datatype)
        if datatype == "BYTES":
            self.assertEqual(list(got), list(want), datatype)
        else:
            self.assertEqual(got.dtype, NUMPY_DTYPES[datatype], datatype)
            np.testing.assert_array_equal(got, want, err_msg=datatype)

    def test_infer_raw_every_datatype(self):
        inputs, values = _every_datatype()
        result = self.client.infer("echo_all", inputs, request_id="every-raw")
        self.assertEqual(result.id, "every-raw")
        self.assertEqual(result.model_name, "echo_all")
        self.assertEqual(result.model_version, "1")
        self.assertEqual(list(result.outputs), [f"OUT_{dt}" for dt in DATATYPES])
        for dt in DATATYPES:
            self.assertEqual(result.datatype(f"OUT_{dt}"), dt)
            self._assert_same(result.as_numpy(f"OUT_{dt}"), values[dt], dt)
        np.testing.assert_array_equal(bf16_to_float32(result.as_numpy("OUT_BF16")),
                                      np.array([1.0, -2.5, 3.140625], np.float32))
        # BF16 from float32 values (rounded to bfloat16) and from a uint16 array.
        inputs["IN_BF16"] = (np.array([1.0, 0.1], np.float32), "BF16")
        for name in inputs:
            if name != "IN_BF16":
                inputs[name] = inputs[name][:2]
        bf16 = self.client.infer("echo_all", inputs, outputs=["OUT_BF16"]).as_numpy("OUT_BF16")
        self.assertEqual(bf16.dtype, np.uint16)
        self.assertEqual(bf16.tolist(), [0x3F80, 0x3DCD])  # 0.1 rounds up to 0x3dcd
        # str is sent as UTF-8 BYTES; Python lists work as inputs too.
        inputs["IN_BYTES"] = np.array(["h\u00e9", "x"], dtype=object)
        inputs["IN_INT64"] = [5, -6]
        out = self.client.infer("echo_all", inputs, outputs=["OUT_BYTES", "OUT_INT64"])
        self.assertEqual(list(out.as_numpy("OUT_BYTES")), ["h\u00e9".encode(), b"x"])
        self.assertEqual(out.as_numpy("OUT_INT64").tolist(), [5, -6])

    def test_infer_empty_and_multidimensional(self):
        inputs, _ = _every_datatype()
        empty = {}
        for name, value in inputs.items():
            array, dt = value if isinstance(value, tuple) else (value, None)
            empty[name] = (array[:0], dt) if dt else array[:0]
        result = self.client.infer("echo_all", empty)
        for dt in DATATYPES:
            self.assertEqual(result.as_numpy(f"OUT_{dt}").shape, (0,), dt)
        out = self.client.infer("two_io", {"INPUT_A": np.ones((4,), np.float32),
                                           "INPUT_B": np.arange(4)})  # int64 on Linux
        self.assertEqual(out.as_numpy("SUM").tolist(), [1, 2, 3, 4])

    def test_infer_typed_outputs_every_datatype(self):
        inputs, values = _every_datatype()
        typed = [f"OUT_{dt}" for dt in DATATYPES if dt not in ("FP16", "BF16")]
        result = self.client.infer("echo_all", inputs, outputs=typed, binary_outputs=False)
        self.assertEqual(len(result.response.raw_output_contents), 0)  # typed contents came back
        self.assertEqual(list(result.outputs), typed)
        for name in typed:
            dt = name[len("OUT_"):]
            self._assert_same(result.as_numpy(name), values[dt], dt)
        # Every output typed: FP16/BF16 have no typed field, so the server
        # answers raw; the client decodes either.
        result = self.client.infer("echo_all", inputs, binary_outputs=False)
        self.assertEqual(len(result.outputs), len(DATATYPES))
        for dt in DATATYPES:
            self._assert_same(result.as_numpy(f"OUT_{dt}"), values[dt], dt)

    def test_infer_typed_inputs(self):
        for binary_outputs in (True, False):
            result = self.client.infer("two_io", _two_io_inputs(), binary=False,
                                       binary_outputs=binary_outputs)
            self.assertEqual(result.as_numpy("SUM").tolist(), [11, 22, 33, 44])
            self.assertEqual(result.as_numpy("PRODUCT").tolist(), [10, 40, 90, 160])
        # The typed field every datatype travels in (the server needs all 14
        # echo_all inputs at once, and FP16/BF16 have no typed field).
        inputs, values = _every_datatype()
        typed = {k: v for k, v in inputs.items() if k not in ("IN_FP16", "IN_BF16")}
        request = self.client.make_request("echo_all", typed, binary=False)
        self.assertEqual(len(request.raw_input_contents), 0)
        fields = {t.name: (t.datatype, t.contents) for t in request.inputs}
        self.assertEqual(list(fields["IN_BOOL"][1].bool_contents), [True, False, True])
        self.assertEqual(list(fields["IN_UINT8"][1].uint_contents), [0, 1, 255])
        self.assertEqual(list(fields["IN_UINT32"][1].uint_contents), [0, 1, 2**32 - 1])
        self.assertEqual(list(fields["IN_UINT64"][1].uint64_contents), [0, 1, 2**63 - 1])
        self.assertEqual(list(fields["IN_INT8"][1].int_contents), [-128, 0, 127])
        self.assertEqual(list(fields["IN_INT16"][1].int_contents), [-32768, 0, 32767])
        self.assertEqual(list(fields["IN_INT64"][1].int64_contents), [-2**63, 0, 2**63 - 1])
        self.assertEqual(list(fields["IN_FP32"][1].fp32_contents), [1.5, -2.25, np.inf])
        self.assertEqual(list(fields["IN_BYTES"][1].bytes_contents), [b"a", b"", b"\xff\x00z"])
        with self.assertRaisesRegex(ValueError, "FP16"):
            self.client.infer("echo_all", inputs, binary=False)
        with self.assertRaisesRegex(ValueError, "BF16"):
            self.client.make_request("echo_all", {"IN_BF16": inputs["IN_BF16"]}, binary=False)

    def test_requested_outputs(self):
        result = self.client.infer("two_io", _two_io_inputs(), outputs=["PRODUCT"])
        self.assertEqual(list(result.outputs), ["PRODUCT"])
        self.assertEqual(result.as_numpy("PRODUCT").tolist(), [10, 40, 90, 160])
        with self.assertRaises(KeyError):
            result.as_numpy("SUM")
        result = self.client.infer("two_io", _two_io_inputs(), outputs=["PRODUCT", "SUM"])
        self.assertEqual(list(result.outputs), ["PRODUCT", "SUM"])
        result = self.client.infer("two_io", _two_io_inputs(), outputs="SUM", binary_outputs=False)
        self.assertEqual(list(result.response.outputs[0].contents.fp32_contents), [11, 22, 33, 44])
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("two_io", _two_io_inputs(), outputs=["NOPE"])
        self.assertEqual(caught.exception.status_code, "INVALID_ARGUMENT")
        self.assertIn("NOPE", caught.exception.message)

    def test_request_id_version_and_parameters(self):
        result = self.client.infer("two_io", _two_io_inputs(), version="1", request_id="req-42",
                                   parameters={"flag": True, "n": 3, "x": 0.5, "s": "text"})
        self.assertEqual(result.id, "req-42")
        self.assertEqual(result.model_version, "1")
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("two_io", _two_io_inputs(), version="9")
        self.assertEqual(caught.exception.status_code, "NOT_FOUND")
        self.assertIn("'9'", caught.exception.message)

    def test_errors_carry_code_and_message(self):
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("no_such_model", _two_io_inputs())
        error = caught.exception
        self.assertEqual(error.status_code, "NOT_FOUND")
        self.assertIn("no_such_model", error.message)
        self.assertEqual(str(error), f"NOT_FOUND: {error.message}")
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("failing", {"INPUT__0": np.array([1.0, -1.0], np.float32)})
        self.assertEqual(caught.exception.status_code, "INTERNAL")
        self.assertIn("ValueError", caught.exception.message)
        self.assertIn("negative input is not allowed", caught.exception.message)
        # The model still serves.
        ok = self.client.infer("failing", {"INPUT__0": np.array([1.0, 2.5], np.float32)})
        self.assertEqual(ok.as_numpy("OUTPUT__0").tolist(), [2.0, 5.0])
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("two_io", _two_io_inputs(3))
        self.assertEqual(caught.exception.status_code, "INVALID_ARGUMENT")
        self.assertIn("INPUT_A", caught.exception.message)
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("two_io", {"INPUT_A": np.ones(4, np.float64),
                                         "INPUT_B": np.arange(4)})
        self.assertEqual(caught.exception.status_code, "INVALID_ARGUMENT")
        self.assertIn("FP64", caught.exception.message)

    def test_unreachable_server_is_unavailable(self):
        with InferenceClient("127.0.0.1:1", timeout=5) as client:
            with self.assertRaises(InferenceServerError) as caught:
                client.is_server_live()
        self.assertEqual(caught.exception.status_code, "UNAVAILABLE")

    def test_streaming(self):
        def requests():
            for i in range(8):
                inputs = _two_io_inputs()
                if i == 5:
                    inputs = _two_io_inputs(3)  # wrong shape: an error on the stream
                yield inputs, f"s{i}"

        results = {r.id: r for r in self.client.stream_infer("two_io", requests())}
        self.assertEqual(set(results), {f"s{i}" for i in range(8)})
        for i in range(8):
            r = results[f"s{i}"]
            if i == 5:
                self.assertFalse(r.ok)
                self.assertEqual(r.error.status_code, "INVALID_ARGUMENT")
                self.assertIn("INPUT_A", r.error.message)
                with self.assertRaises(InferenceServerError):
                    r.as_numpy("SUM")
            else:
                self.assertTrue(r.ok, r)
                self.assertEqual(r.as_numpy("SUM").tolist(), [11, 22, 33, 44])
                self.assertEqual(r.model_version, "1")
        # Plain input dicts get their index as id; typed and requested outputs work too.
        results = list(self.client.stream_infer("two_io", [_two_io_inputs()] * 3,
                                                outputs=["PRODUCT"], binary=False,
                                                binary_outputs=False))
        self.assertEqual(sorted(r.id for r in results), ["0", "1", "2"])
        for r in results:
            self.assertEqual(list(r.outputs), ["PRODUCT"])
            self.assertEqual(r.as_numpy("PRODUCT").tolist(), [10, 40, 90, 160])
        # An unknown model: every request answered with NOT_FOUND.
        results = list(self.client.stream_infer("no_such_model", [_two_io_inputs()] * 2))
        self.assertEqual([r.error.status_code for r in results], ["NOT_FOUND"] * 2)
        # A bad input on the client side is raised in the caller, after the others.
        with self.assertRaises(ValueError):
            list(self.client.stream_infer("two_io", [_two_io_inputs(),
                                                     {"INPUT_A": (np.ones(4), "NOPE")}]))

    def test_load_unload_and_deadlines(self):
        self.assertFalse(self.client.is_model_ready("slow"))
        self.client.load_model("slow")
        try:
            self.assertTrue(self.client.is_model_ready("slow"))
            self.assertEqual(self.client.model_config("slow")["max_batch_size"], 8)
            ms = np.array([[10]], np.int64)
            self.assertEqual(self.client.infer("slow", {"MS": ms}).as_numpy("MS").tolist(), [[10]])
            # A per-call deadline.
            start = time.monotonic()
            with self.assertRaises(InferenceServerError) as caught:
                self.client.infer("slow", {"MS": np.array([[1000]], np.int64)}, timeout=0.3)
            self.assertEqual(caught.exception.status_code, "DEADLINE_EXCEEDED")
            self.assertLess(time.monotonic() - start, 0.9)
            # The client's default deadline.
            with InferenceClient(self.address, timeout=0.3) as hasty:
                with self.assertRaises(InferenceServerError) as caught:
                    hasty.infer("slow", {"MS": np.array([[1000]], np.int64)})
                self.assertEqual(caught.exception.status_code, "DEADLINE_EXCEEDED")
                self.assertTrue(hasty.is_server_live())  # fast calls make it in time
            # A whole stream's deadline.
            with self.assertRaises(InferenceServerError) as caught:
                list(self.client.stream_infer("slow", [{"MS": np.array([[1000]], np.int64)}],
                                              timeout=0.3))
            self.assertEqual(caught.exception.status_code, "DEADLINE_EXCEEDED")
        finally:
            self.client.unload_model("slow")
        self.assertFalse(self.client.is_model_ready("slow"))
        with self.assertRaises(InferenceServerError) as caught:
            self.client.infer("slow", {"MS": np.array([[1]], np.int64)})
        self.assertEqual(caught.exception.status_code, "UNAVAILABLE")
        index = {m["name"]: m for m in self.client.repository_index()}
        self.assertNotEqual(index["slow"]["state"], "READY")
        # (A name of its own: a failed load leaves an UNAVAILABLE entry in the
        # server's index, which turns later NOT_FOUNDs for that name into UNAVAILABLE.)
        with self.assertRaises(InferenceServerError) as caught:
            self.client.load_model("never_in_the_repository")
        self.assertEqual(caught.exception.status_code, "NOT_FOUND")
        self.assertIn("never_in_the_repository", caught.exception.message)

    def test_bad_inputs_are_refused_before_sending(self):
        with self.assertRaises(TypeError):
            self.client.infer("two_io", [np.ones(4)])
        with self.assertRaisesRegex(ValueError, "NOPE"):
            self.client.infer("two_io", {"INPUT_A": (np.ones(4), "NOPE")})
        with self.assertRaisesRegex(ValueError, "complex"):
            self.client.infer("two_io", {"INPUT_A": np.ones(4, np.complex64)})


class Bf16Test(unittest.TestCase):
    def test_round_trip(self):
        values = np.array([0.0, 1.0, -2.5, 3.140625, np.inf, -np.inf], np.float32)
        np.testing.assert_array_equal(bf16_to_float32(float32_to_bf16(values)), values)
        self.assertEqual(float32_to_bf16(np.array([np.nan], np.float32)).tolist(), [0x7FC0])
        self.assertEqual(float32_to_bf16(np.array([1.00390625], np.float32)).tolist(), [0x3F80])  # tie: even


def _cli_env():
    env = dict(os.environ)
    paths = PACKAGE_DIRS + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("MANYPY_URL", None)
    return env


class CliTest(ServerTestCase):

    def cli(self, *args, launcher=None):
        command = [launcher] if launcher else [sys.executable, "-m", "manypy.client.cli"]
        env = _cli_env()
        if launcher:  # the launcher must set up sys.path by itself
            env.pop("PYTHONPATH")
        done = subprocess.run(command + ["-u", self.address, "--timeout", "60", *args],
                              capture_output=True, text=True, env=env, timeout=120)
        return done.returncode, done.stdout, done.stderr

    def test_health(self):
        code, out, err = self.cli("health")
        self.assertEqual(code, 0, err)
        self.assertIn("live: true", out)
        self.assertIn("ready: true", out)
        self.assertIn("health: SERVING", out)

    def test_models(self):
        code, out, err = self.cli("models")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "VERSION", "STATE", "REASON"])
        rows = {line.split()[0]: line.split() for line in lines[1:]}
        self.assertEqual(rows["two_io"][1:3], ["1", "READY"])
        self.assertEqual(rows["resnet50"][2], "UNAVAILABLE")
        code, out, err = self.cli("models", "--ready", "--json")
        self.assertEqual(code, 0, err)
        self.assertEqual({m["state"] for m in json.loads(out)}, {"READY"})

    def test_metadata_config_stats(self):
        code, out, err = self.cli("metadata", "two_io")
        self.assertEqual(code, 0, err)
        meta = json.loads(out)
        self.assertEqual(meta["name"], "two_io")
        self.assertEqual(meta["inputs"][0]["shape"], [4])
        code, out, err = self.cli("config", "two_io")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["input"][1]["data_type"], "TYPE_INT64")
        code, out, err = self.cli("stats", "two_io")
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["model_stats"][0]["name"], "two_io")

    def test_infer_npy_json_and_output_dir(self):
        with tempfile.TemporaryDirectory() as tmp:
            a = os.path.join(tmp, "a.npy")
            np.save(a, np.array([1, 2, 3, 4], np.float32))
            b = os.path.join(tmp, "b.json")
            with open(b, "w") as f:
                json.dump([10, 20, 30, 40], f)
            out_dir = os.path.join(tmp, "out")
            code, out, err = self.cli("infer", "two_io", "--input", f"INPUT_A={a}",
                                      "--input", f"INPUT_B={b}", "--output-dir", out_dir,
                                      "--id", "cli-1")
            self.assertEqual(code, 0, err)
            self.assertIn("id: cli-1", out)
            self.assertIn("SUM: FP32 [4]", out)
            self.assertIn("PRODUCT: FP32 [4]", out)
            self.assertEqual(sorted(os.listdir(out_dir)), ["PRODUCT.npy", "SUM.npy"])
            np.testing.assert_array_equal(np.load(os.path.join(out_dir, "SUM.npy")),
                                          np.array([11, 22, 33, 44], np.float32))
            # A JSON literal (cast to the model's datatype), one requested output, typed.
            code, out, err = self.cli("infer", "two_io", "--input", "INPUT_A=[1, 2, 3, 4]",
                                      "--input", f"INPUT_B={b}", "--output", "PRODUCT",
                                      "--typed", "--output-dir", out_dir)
            self.assertEqual(code, 0, err)
            self.assertNotIn("SUM", out)
            np.testing.assert_array_equal(np.load(os.path.join(out_dir, "PRODUCT.npy")),
                                          np.array([10, 40, 90, 160], np.float32))
            # BYTES and an explicit datatype through echo_all.
            args = []
            for dt in DATATYPES:
                args += ["--input", f"IN_{dt}=" + ('["x", "yz"]' if dt == "BYTES" else "[1, 0]")]
            args += ["--input", "IN_BF16:BF16=[1.0, 2.0]"]
            code, out, err = self.cli("infer", "echo_all", *args, "--output", "OUT_BYTES",
                                      "--output", "OUT_BF16", "--output-dir", out_dir)
            self.assertEqual(code, 0, err)
            self.assertEqual(list(np.load(os.path.join(out_dir, "OUT_BYTES.npy"),
                                          allow_pickle=True)), [b"x", b"yz"])
            self.assertEqual(np.load(os.path.join(out_dir, "OUT_BF16.npy")).tolist(),
                             [0x3F80, 0x4000])

    def test_errors_exit_1_with_code_and_message(self):
        code, out, err = self.cli("infer", "no_such_model", "--input", "X=[1]")
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith("error: NOT_FOUND: "), err)
        self.assertIn("no_such_model", err)
        code, out, err = self.cli("infer", "failing", "--input", "INPUT__0=[-1.0]")
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith("error: INTERNAL: "), err)
        self.assertIn("ValueError", err)
        code, out, err = self.cli("infer", "two_io", "--input", "INPUT_A=[1, 2]",
                                  "--input", "INPUT_B=[1, 2]")
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith("error: INVALID_ARGUMENT: "), err)
        code, out, err = self.cli("infer", "two_io", "--input", "INPUT_C=[1]")
        self.assertEqual(code, 1)
        self.assertIn("INPUT_C", err)
        code, out, err = self.cli("infer", "two_io", "--input", "INPUT_A=/no/such/file.npy")
        self.assertEqual(code, 1)
        self.assertIn("no such file", err)
        code, out, err = self.cli("metadata", "no_such_model")
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith("error: NOT_FOUND: "), err)

    def test_load_unload(self):
        code, out, err = self.cli("load", "slow")
        self.assertEqual(code, 0, err)
        code, out, err = self.cli("models", "--ready")
        self.assertIn("slow", out)
        code, out, err = self.cli("unload", "slow")
        self.assertEqual(code, 0, err)
        code, out, err = self.cli("models", "--ready")
        self.assertNotIn("slow", out)
        code, out, err = self.cli("load", "never_in_the_repository")
        self.assertEqual(code, 1)
        self.assertTrue(err.startswith("error: NOT_FOUND: "), err)

    def test_launcher(self):
        launcher = os.path.join(os.path.dirname(SERVER), "manypy-client")
        if not os.access(launcher, os.X_OK):
            self.skipTest(f"{launcher} not generated (clients/python not in the build)")
        code, out, err = self.cli("health", launcher=launcher)
        self.assertEqual(code, 0, err)
        self.assertIn("health: SERVING", out)


if __name__ == "__main__":
    unittest.main()
