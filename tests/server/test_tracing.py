"""OpenTelemetry tracing end to end (docs/operations.md "Tracing").

Where the server is built with opentelemetry-cpp (Debian 13), a real OTLP/HTTP
receiver (http.server decoding ExportTraceServiceRequest with Debian's
python3-opentelemetry-proto) takes what manypy-server exports, and the spans
of a batched request, a nested manypy.infer call, a gRPC stream, an error and
a cancelled request must arrive with the client's trace ids, the right
parent links and attributes; the sampling ratio and a client's sampled flag
decide; an unreachable collector costs the requests nothing but counted,
logged drops. Where it is built without (Debian 12), --help and the start-up
log say so, and every tracing flag is refused with the reason.

    ctest -R 'tracing_e2e_test|tracing_refused_test'
"""
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python"),
                os.path.join(REPO, "tests", "test_util"), os.path.join(HERE, "models")]
from manypy_server import SERVER, ManypyServer  # noqa: E402

BUILT_IN = os.environ.get("MANYPY_TRACING_BUILT_IN") == "1"

SPAN_KIND_INTERNAL, SPAN_KIND_SERVER = 1, 2
STATUS_ERROR = 2


class Receiver:
    """An OTLP/HTTP traces receiver on 127.0.0.1: every span it is sent,
    decoded, with its resource's attributes."""

    def __init__(self):
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
        self.spans = []
        self.resources = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    for rs in request.resource_spans:
                        resource = {a.key: value_of(a.value) for a in rs.resource.attributes}
                        receiver.resources.append(resource)
                        for ss in rs.scope_spans:
                            receiver.spans.extend(ss.spans)
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def trace(self, trace_id, count, timeout=20):
        """The spans of trace `trace_id` (hex), once at least `count` arrived."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                spans = [s for s in self.spans if s.trace_id.hex() == trace_id]
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def value_of(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


def attributes(span):
    return {a.key: value_of(a.value) for a in span.attributes}


def traceparent(trace_id, parent_id, sampled=True):
    return f"00-{trace_id}-{parent_id}-{'01' if sampled else '00'}"


def new_ids():
    return os.urandom(16).hex(), os.urandom(8).hex()


class Server(ManypyServer):
    def __init__(self, repository, flags, env=None, metrics=False):
        args = ["--grpc-address=127.0.0.1", "--grpc-port=0", "--http-address=127.0.0.1",
                "--http-port=0", "--interpreters=1", f"--model-repository={repository}"]
        args += ["--metrics-address=127.0.0.1", "--metrics-port=0"] if metrics else ["--no-metrics"]
        super().__init__(args + flags, env=env)

    def infer(self, model, values, headers=None, timeout=30):
        """HTTP JSON inference: (status code, decoded body). `double` batches:
        its request is one row."""
        shape = [1, len(values)] if model == "double" else [len(values)]
        body = json.dumps({"inputs": [{"name": "INPUT__0", "datatype": "FP32",
                                       "shape": shape, "data": values}]})
        host, port = self.http.split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        try:
            conn.request("POST", f"/v2/models/{model}/infer", body=body,
                         headers=dict({"Content-Type": "application/json"}, **(headers or {})))
            response = conn.getresponse()
            return response.status, json.loads(response.read() or b"{}")
        finally:
            conn.close()

    def metric(self, line_start):
        """The value of the /metrics line that starts with `line_start`, or None."""
        text = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(line_start):
                return float(line.rsplit(" ", 1)[1])
        return None


def package_models(repository):
    import torch
    import manypy.package
    import tracing_models as m
    io = {"inputs": [("INPUT__0", "FP32", [-1])], "outputs": [("OUTPUT__0", "FP32", [-1])]}
    manypy.package.export(m.Double(), os.path.join(repository, "double.mpk"), name="double",
                          inputs=[("INPUT__0", "FP32", [-1])],
                          outputs=[("OUTPUT__0", "FP32", [-1])], max_batch_size=8,
                          example_inputs=(torch.ones(1, 2),),
                          batching={"dynamic": True, "max_queue_delay_microseconds": 300000})
    manypy.package.export(m.TracedCaller(), os.path.join(repository, "traced_caller.mpk"),
                          name="traced_caller", inputs=[("INPUT__0", "FP32", [-1])],
                          outputs=[("OUTPUT__0", "FP32", [-1]), ("TRACE_ID", "BYTES", [1])])
    manypy.package.export(m.Ticks(), os.path.join(repository, "ticks.mpk"), name="ticks", **io)
    manypy.package.export(m.Fails(), os.path.join(repository, "fails.mpk"), name="fails", **io)
    manypy.package.export(m.Sleeps(), os.path.join(repository, "sleeps.mpk"), name="sleeps", **io)


@unittest.skipUnless(BUILT_IN, "this manypy-server is built without OpenTelemetry")
class TracingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.repository = os.path.join(cls.tmp.name, "repository")
        os.makedirs(cls.repository)
        package_models(cls.repository)
        cls.receiver = Receiver()
        cls.server = Server(cls.repository,
                            ["--tracing", f"--trace-endpoint={cls.receiver.url}",
                             "--trace-service-name=manypy-under-test",
                             "--trace-resource=deployment.environment=test"],
                            env={"OTEL_BSP_SCHEDULE_DELAY": "100"})

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.receiver.close()
        cls.tmp.cleanup()

    def by_name(self, spans, name):
        found = [s for s in spans if s.name == name]
        self.assertEqual(len(found), 1, [s.name for s in spans])
        return found[0]

    def test_start_up_log_and_resource(self):
        self.assertIn("tracing: OTLP/HTTP to " + self.receiver.url, self.server.stderr())
        trace_id, parent = new_ids()
        self.server.infer("double", [1.0, 2.0], {"traceparent": traceparent(trace_id, parent)})
        self.receiver.trace(trace_id, 3)
        with self.receiver.lock:
            resource = self.receiver.resources[-1]
        self.assertEqual(resource.get("service.name"), "manypy-under-test")
        self.assertEqual(resource.get("deployment.environment"), "test")
        self.assertTrue(resource.get("service.version"))

    def test_batched_requests_join_their_clients_traces(self):
        clients = [new_ids() for _ in range(4)]
        results = [None] * 4
        # All four set out together: under load, threads started one by one
        # were once more than the 300 ms queue delay apart (4 batches of 1).
        start = threading.Barrier(4)

        def send(i):
            trace_id, parent = clients[i]
            start.wait(timeout=30)
            results[i] = self.server.infer(
                "double", [float(i), 1.0],
                {"traceparent": traceparent(trace_id, parent), "tracestate": "vendor=abc"})

        threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, (status, body) in enumerate(results):
            self.assertEqual(status, 200, body)
            self.assertEqual(body["outputs"][0]["data"], [2.0 * i, 2.0])
        batch_sizes = []
        for trace_id, parent in clients:
            spans = self.receiver.trace(trace_id, 3)
            request = self.by_name(spans, "infer double")
            self.assertEqual(request.parent_span_id.hex(), parent)
            self.assertEqual(request.kind, SPAN_KIND_SERVER)
            self.assertEqual(request.trace_state, "vendor=abc")
            a = attributes(request)
            self.assertEqual(a["manypy.model.name"], "double")
            self.assertEqual(a["manypy.model.version"], 1)
            self.assertEqual(a["manypy.outcome"], "OK")
            self.assertEqual(a["http.request.method"], "POST")
            self.assertEqual(a["url.path"], "/v2/models/double/infer")
            self.assertIn("/infer", a["http.route"])
            self.assertGreater(a["manypy.request.bytes"], 0)
            self.assertGreater(a["manypy.response.bytes"], 0)
            for child in ("manypy.queue", "manypy.execute"):
                span = self.by_name(spans, child)
                self.assertEqual(span.parent_span_id, request.span_id, child)
                self.assertGreaterEqual(span.start_time_unix_nano, request.start_time_unix_nano)
                self.assertLessEqual(span.end_time_unix_nano, request.end_time_unix_nano)
            execute = self.by_name(spans, "manypy.execute")
            batch_sizes.append(attributes(execute)["manypy.batch_size"])
            self.assertEqual(a["manypy.batch_size"], batch_sizes[-1])
        # Concurrent requests within the 300 ms queue delay ran as one batch
        # (or two, if one came late): each request's span says how many rows.
        self.assertGreaterEqual(max(batch_sizes), 2, batch_sizes)

    def test_a_request_without_traceparent_starts_its_own_trace(self):
        before = len(self.receiver.spans)
        status, _ = self.server.infer("double", [3.0], {"traceparent": "not-a-traceparent"})
        self.assertEqual(status, 200)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with self.receiver.lock:
                new = [s for s in self.receiver.spans[before:] if s.name == "infer double"]
            if new:
                break
            time.sleep(0.05)
        self.assertTrue(new)
        self.assertEqual(new[0].parent_span_id, b"")
        self.assertEqual(len(new[0].trace_id), 16)

    def test_nested_call_is_a_child_of_its_callers_span(self):
        trace_id, parent = new_ids()
        status, body = self.server.infer("traced_caller", [1.0, 2.0],
                                         {"traceparent": traceparent(trace_id, parent)})
        self.assertEqual(status, 200, body)
        outputs = {o["name"]: o["data"] for o in body["outputs"]}
        self.assertEqual(outputs["OUTPUT__0"], [3.0, 5.0])
        self.assertEqual(outputs["TRACE_ID"], [trace_id])  # manypy.request.trace_id
        spans = self.receiver.trace(trace_id, 8)
        caller = self.by_name(spans, "infer traced_caller")
        self.assertEqual(caller.parent_span_id.hex(), parent)
        self.assertEqual(attributes(caller)["caller.note"], "prepared")
        own = self.by_name(spans, "caller.prepare")
        self.assertEqual(own.parent_span_id, caller.span_id)
        self.assertEqual(attributes(own)["rows"], 2)
        nested = self.by_name(spans, "infer double")
        self.assertEqual(nested.parent_span_id, caller.span_id)
        self.assertEqual(nested.kind, SPAN_KIND_INTERNAL)
        self.assertEqual(attributes(nested)["manypy.caller"], "traced_caller")
        self.assertEqual(attributes(nested)["manypy.outcome"], "OK")
        # The nested call ran inside its caller's execution.
        caller_execute = [s for s in spans if s.name == "manypy.execute"
                          and s.parent_span_id == caller.span_id][0]
        self.assertGreaterEqual(nested.start_time_unix_nano, caller_execute.start_time_unix_nano)
        self.assertLessEqual(nested.end_time_unix_nano, caller_execute.end_time_unix_nano)

    def test_grpc_stream_responses_are_events(self):
        from manypy.client import InferenceClient
        import numpy as np
        trace_id, parent = new_ids()
        client = InferenceClient(self.server.grpc)
        # The client sends its own metadata (a token) this way; here the W3C header.
        client._metadata = (("traceparent", traceparent(trace_id, parent)),)
        try:
            results = list(client.stream_infer("ticks", [{"INPUT__0": np.array([1.0], np.float32)}]))
        finally:
            client.close()
        self.assertEqual([r.as_numpy("OUTPUT__0").tolist() for r in results], [[1.0], [2.0], [3.0]])
        spans = self.receiver.trace(trace_id, 3)
        request = self.by_name(spans, "infer ticks")
        self.assertEqual(request.parent_span_id.hex(), parent)
        a = attributes(request)
        self.assertEqual(a["rpc.system"], "grpc")
        self.assertEqual(a["rpc.method"], "ModelStreamInfer")
        self.assertEqual(a["rpc.grpc.status_code"], 0)
        events = [e for e in request.events if e.name == "manypy.response"]
        self.assertEqual([attributes(e)["manypy.response.index"] for e in events], [0, 1, 2])
        self.assertTrue(all(attributes(e)["manypy.response.bytes"] > 0 for e in events))

    def test_an_error_marks_the_span_and_its_execution(self):
        trace_id, parent = new_ids()
        status, body = self.server.infer("fails", [-1.0], {"traceparent": traceparent(trace_id, parent)})
        self.assertEqual(status, 500, body)
        spans = self.receiver.trace(trace_id, 3)
        request = self.by_name(spans, "infer fails")
        self.assertEqual(request.status.code, STATUS_ERROR)
        self.assertIn("fails always fails", request.status.message)
        self.assertEqual(attributes(request)["manypy.outcome"], "INTERNAL")
        execute = self.by_name(spans, "manypy.execute")
        self.assertEqual(execute.status.code, STATUS_ERROR)

    def test_a_cancelled_request_says_so_and_never_ran(self):
        # One interpreter: `sleeps` holds it while the second request waits
        # in the queue, and that request's client hangs up.
        busy = threading.Thread(target=self.server.infer, args=("sleeps", [1.0]))
        busy.start()
        time.sleep(0.3)
        trace_id, parent = new_ids()
        body = json.dumps({"inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [1],
                                       "data": [1.0]}]}).encode()
        host, port = self.server.http.split(":")
        with socket.create_connection((host, int(port))) as s:
            s.sendall((f"POST /v2/models/sleeps/infer HTTP/1.1\r\nHost: {host}\r\n"
                       f"traceparent: {traceparent(trace_id, parent)}\r\n"
                       f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
                      .encode() + body)
            time.sleep(0.3)
        busy.join()
        spans = self.receiver.trace(trace_id, 1)
        request = self.by_name(spans, "infer sleeps")
        self.assertEqual(attributes(request)["manypy.outcome"], "CANCELLED")
        self.assertEqual(request.status.code, STATUS_ERROR)
        self.assertEqual([s.name for s in spans if s.name == "manypy.execute"], [])


@unittest.skipUnless(BUILT_IN, "this manypy-server is built without OpenTelemetry")
class SamplingAndUnreachableCollectorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.repository = os.path.join(cls.tmp.name, "repository")
        os.makedirs(cls.repository)
        package_models(cls.repository)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_ratio_zero_samples_only_what_the_client_sampled(self):
        receiver = Receiver()
        # The ratio from the standard variable.
        server = Server(self.repository, ["--tracing", f"--trace-endpoint={receiver.url}"],
                        env={"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_TRACES_SAMPLER_ARG": "0"})
        try:
            self.assertIn("sample ratio 0.0", server.stderr())
            unsampled_id, unsampled_parent = new_ids()
            sampled_id, sampled_parent = new_ids()
            for _ in range(5):
                self.assertEqual(server.infer("double", [1.0])[0], 200)
            self.assertEqual(server.infer("double", [1.0], {"traceparent": traceparent(
                unsampled_id, unsampled_parent, sampled=False)})[0], 200)
            self.assertEqual(server.infer("double", [1.0], {"traceparent": traceparent(
                sampled_id, sampled_parent)})[0], 200)
            sampled = receiver.trace(sampled_id, 3)
            self.assertEqual(self.by_parent(sampled).parent_span_id.hex(), sampled_parent)
            time.sleep(0.5)
            with receiver.lock:
                self.assertEqual({s.trace_id.hex() for s in receiver.spans}, {sampled_id})
        finally:
            server.stop()
            receiver.close()

    @staticmethod
    def by_parent(spans):
        return [s for s in spans if s.name == "infer double"][0]

    def test_an_unreachable_collector_costs_requests_nothing_but_counted_drops(self):
        # Nothing listens on a port the kernel just gave and took back.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = Server(self.repository,
                        ["--tracing", f"--trace-endpoint=http://127.0.0.1:{port}/v1/traces"],
                        env={"OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_EXPORTER_OTLP_TIMEOUT": "1000"},
                        metrics=True)
        try:
            started = time.monotonic()
            for i in range(10):
                status, body = server.infer("double", [float(i)], timeout=10)
                self.assertEqual(status, 200, body)
                self.assertEqual(body["outputs"][0]["data"], [2.0 * i])
            self.assertLess(time.monotonic() - started, 8)
            deadline = time.monotonic() + 20
            while "did not take" not in server.stderr() and time.monotonic() < deadline:
                time.sleep(0.1)
            # Every request's spans (3 each) were dropped by now, and counted.
            deadline = time.monotonic() + 20
            while ((server.metric('manypy_trace_spans_total{result="dropped"}') or 0) < 30
                   and time.monotonic() < deadline):
                time.sleep(0.1)
            self.assertEqual(server.metric('manypy_trace_spans_total{result="dropped"}'), 30)
            self.assertEqual(server.metric('manypy_trace_spans_total{result="exported"}'), 0)
        finally:
            server.stop()
        log = server.stderr()
        self.assertIn(f"the collector at http://127.0.0.1:{port}/v1/traces did not take", log)
        totals = re.search(r"tracing: (\d+) spans exported, (\d+) dropped", log)
        self.assertIsNotNone(totals, log[-2000:])
        self.assertEqual(int(totals.group(1)), 0)
        self.assertEqual(int(totals.group(2)), 30)


@unittest.skipIf(BUILT_IN, "this manypy-server is built with OpenTelemetry")
class TracingNotBuiltInTest(unittest.TestCase):
    def test_help_says_not_built_in_and_why(self):
        out = subprocess.run([SERVER, "--help"], capture_output=True, text=True, timeout=60).stdout
        self.assertIn("Tracing (OpenTelemetry, off by default; NOT BUILT IN: ", out)
        self.assertIn("opentelemetry-cpp", out)
        for flag in ("--tracing", "--trace-endpoint", "--trace-sample-ratio",
                     "--trace-service-name", "--trace-resource"):
            self.assertIn("\n  " + flag, out)

    def test_every_tracing_flag_is_refused_with_the_reason(self):
        for flag in ("--tracing", "--tracing=true", "--trace-endpoint=http://127.0.0.1:4318/v1/traces",
                     "--trace-sample-ratio=0.5", "--trace-service-name=x", "--trace-resource=a=b"):
            proc = subprocess.run([SERVER, flag, "--model-repository=/nonexistent"],
                                  capture_output=True, text=True, timeout=60)
            self.assertNotEqual(proc.returncode, 0, flag)
            name = flag.split("=")[0]
            self.assertIn(name + ": tracing is not built into this manypy-server: ", proc.stderr, flag)
            self.assertIn("opentelemetry-cpp", proc.stderr, flag)


if __name__ == "__main__":
    unittest.main()
