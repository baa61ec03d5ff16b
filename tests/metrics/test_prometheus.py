"""manypy-server scraped by a real Prometheus.

Starts manypy-server (loopback, --metrics-port=0) and Debian's prometheus
(its own temporary storage, scrape interval 1 s, the alert rules of
deploy/prometheus loaded), sends a known set of requests (successes, model
errors, invalid arguments, unknown models, an unloaded model, a full queue, a
deadline passed in the queue, batched requests, a reload), then checks through
Prometheus' HTTP query API that every counter and histogram count is exactly
what was sent, that ModelStatistics agrees and survived the reload, and that
every Grafana panel expression (variables substituted) returns data.

    ctest -R prometheus_metrics_test
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "package_format", "python"), os.path.join(REPO, "clients", "python"),
                os.path.join(REPO, "tests", "test_util")]
from manypy_server import ManypyServer  # noqa: E402

from manypy.client import InferenceClient, InferenceServerError  # noqa: E402

REPOSITORY = os.environ.get("MANYPY_TEST_REPOSITORY", os.path.join(REPO, "build", "test-model-repository"))
PROMETHEUS = os.environ.get("PROMETHEUS_BINARY") or "/usr/bin/prometheus"
DASHBOARD = os.path.join(REPO, "deploy", "grafana", "manypy-dashboard.json")
RULES = os.path.join(REPO, "deploy", "prometheus", "manypy.rules.yml")

# What the test sends (see send_requests).
FAILING_OK, FAILING_RAISES, FAILING_BAD = 5, 3, 2
UNKNOWN = 2
BATCHED_REQUESTS, BATCHED_ROWS = 8, 2


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(ManypyServer):
    def __init__(self):
        super().__init__(["--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0",
                          "--metrics-address=127.0.0.1", "--metrics-port=0", "--interpreters=2",
                          "--model-control-mode=explicit", "--load-model=failing",
                          "--load-model=slow", "--load-model=batched_double",
                          "--model-config=slow:instance_count=1",
                          "--model-config=slow:max_queue_size=1",
                          f"--model-repository={REPOSITORY}"], start_timeout_s=180)


class Prometheus:
    def __init__(self, target, workdir):
        self.port = free_port()
        config = os.path.join(workdir, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {RULES}
scrape_configs:
  - job_name: manypy
    static_configs:
      - targets: ["{target}"]
""")
        self.log = open(os.path.join(workdir, "prometheus.log"), "w")
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2).read()
                return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("prometheus did not start; see " + self.log.name)
                time.sleep(0.2)

    def query(self, expr):
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        if body["status"] != "success":
            raise AssertionError(f"{expr}: {body}")
        return body["data"]["result"]

    def value(self, expr):
        result = self.query(expr)
        return None if not result else float(result[0]["value"][1])

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@unittest.skipUnless(os.path.exists(PROMETHEUS), "prometheus is not installed")
class PrometheusMetricsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.server = Server()
        cls.prometheus = Prometheus(cls.server.metrics, cls.tmp.name)
        cls.client = InferenceClient(cls.server.grpc)
        cls.send_requests()
        cls.statistics = {m["name"]: m for m in cls.client.model_statistics()["model_stats"]}

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.prometheus.stop()
        cls.server.stop()
        cls.tmp.cleanup()

    @classmethod
    def send_requests(cls):
        c = cls.client
        x = np.ones(4, dtype=np.float32)
        for _ in range(FAILING_OK):
            c.infer("failing", {"INPUT__0": x})
        for _ in range(FAILING_RAISES):  # ValueError in the model: INTERNAL
            cls._fails(lambda: c.infer("failing", {"INPUT__0": -x}))
        for _ in range(FAILING_BAD):  # wrong input name: INVALID_ARGUMENT
            cls._fails(lambda: c.infer("failing", {"WRONG": x}))
        for _ in range(UNKNOWN):  # NOT_FOUND, counted as model "no_such_model"
            cls._fails(lambda: c.infer("no_such_model", {"INPUT__0": x}))
        # slow: one instance, a queue of one. A runs 1.5 s; B waits in the
        # queue past its deadline (DEADLINE_EXCEEDED); C finds the queue full
        # (RESOURCE_EXHAUSTED).
        a = threading.Thread(target=lambda: c.infer("slow", {"MS": np.array([[1500]], np.int64)}))
        a.start()
        time.sleep(0.3)
        b = threading.Thread(target=lambda: cls._fails(
            lambda: c.infer("slow", {"MS": np.array([[1]], np.int64)}, timeout=0.6)))
        b.start()
        time.sleep(0.2)
        cls._fails(lambda: c.infer("slow", {"MS": np.array([[1]], np.int64)}))
        a.join()
        b.join()
        # Batched: 8 concurrent requests of 2 rows each.
        threads = [threading.Thread(target=lambda: c.infer(
            "batched_double", {"X": np.ones((BATCHED_ROWS, 2), np.float32)}))
            for _ in range(BATCHED_REQUESTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Reload failing (same version): its counts continue.
        c.load_model("failing")
        # An unloaded model: UNAVAILABLE, counted under its name.
        c.unload_model("slow")
        cls._fails(lambda: c.infer("slow", {"MS": np.array([[1]], np.int64)}))

    @staticmethod
    def _fails(call):
        try:
            call()
        except InferenceServerError:
            return
        raise AssertionError("the request did not fail")

    def wait_for(self, expr, expected, timeout=30, absent_ok=False):
        """Until `expr` equals `expected` (absent_ok: until it returns anything)."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = self.prometheus.value(expr)
            if value == expected or (absent_ok and value is not None):
                return
            time.sleep(0.5)
        self.fail(f"{expr} = {value}, expected {expected}")

    def requests(self, model, outcome, version="1"):
        return (f'manypy_requests_total{{job="manypy",model="{model}",version="{version}",'
                f'outcome="{outcome}"}}')

    def test_request_counters_match(self):
        self.wait_for(self.requests("failing", "success"), FAILING_OK)
        self.wait_for(self.requests("failing", "model_error"), FAILING_RAISES)
        self.wait_for(self.requests("failing", "invalid_argument"), FAILING_BAD)
        self.wait_for(self.requests("no_such_model", "not_found", version=""), UNKNOWN)
        self.wait_for(self.requests("slow", "success"), 1)
        self.wait_for(self.requests("slow", "deadline_exceeded"), 1)
        self.wait_for(self.requests("slow", "resource_exhausted"), 1)
        self.wait_for(self.requests("slow", "unavailable", version=""), 1)
        self.wait_for(self.requests("batched_double", "success"), BATCHED_REQUESTS)
        self.wait_for('sum(manypy_requests_total{job="manypy"})',
                      FAILING_OK + FAILING_RAISES + FAILING_BAD + UNKNOWN + 4 + BATCHED_REQUESTS)
        self.wait_for('manypy_model_exceptions_total{model="failing",type="ValueError"}', FAILING_RAISES)

    def test_inferences_executions_and_histograms_match(self):
        failing = 'model="failing",version="1"'
        ran = FAILING_OK + FAILING_RAISES
        self.wait_for(f"manypy_inferences_total{{{failing}}}", ran)
        self.wait_for(f"manypy_executions_total{{{failing}}}", ran)
        self.wait_for(f"manypy_compute_duration_seconds_count{{{failing}}}", ran)
        self.wait_for(f"manypy_batch_size_count{{{failing}}}", ran)
        self.wait_for(f"manypy_request_duration_seconds_count{{{failing}}}",
                      FAILING_OK + FAILING_RAISES + FAILING_BAD)
        self.wait_for(f"manypy_queue_duration_seconds_count{{{failing}}}", ran)
        self.wait_for('manypy_request_duration_seconds_count{model="slow"}', 3)
        self.wait_for('manypy_queue_duration_seconds_count{model="slow"}', 1)
        batched = 'model="batched_double",version="1"'
        rows = BATCHED_REQUESTS * BATCHED_ROWS
        self.wait_for(f"manypy_inferences_total{{{batched}}}", rows)
        self.wait_for(f"manypy_batch_size_sum{{{batched}}}", rows)
        self.wait_for(f'manypy_batch_size_bucket{{{batched},le="+Inf"}}',
                      self.statistics["batched_double"]["execution_count"])
        self.wait_for(f"manypy_executions_total{{{batched}}}",
                      self.statistics["batched_double"]["execution_count"])
        self.wait_for(f"manypy_request_duration_seconds_count{{{batched}}}", BATCHED_REQUESTS)

    def test_model_statistics_agree_and_survive_reload(self):
        s = self.statistics["failing"]
        self.assertEqual(int(s["inference_count"]), FAILING_OK + FAILING_RAISES)
        self.assertEqual(int(s["execution_count"]), FAILING_OK + FAILING_RAISES)
        self.assertEqual(int(s["inference_stats"]["success"]["count"]), FAILING_OK)
        self.assertEqual(int(s["inference_stats"]["fail"]["count"]), FAILING_RAISES + FAILING_BAD)
        b = self.statistics["batched_double"]
        self.assertEqual(int(b["inference_count"]), BATCHED_REQUESTS * BATCHED_ROWS)
        self.assertLessEqual(int(b["execution_count"]), BATCHED_REQUESTS)

    def test_lifecycle_and_process_metrics(self):
        self.wait_for('manypy_model_ready{model="failing",version="1"}', 1)
        self.wait_for('manypy_model_ready{model="slow",version="1"}', 0)
        self.wait_for('count(manypy_interpreter_busy_seconds_total{job="manypy"})', 2)
        self.wait_for('manypy_interpreters{job="manypy"}', 2)
        self.wait_for('count(manypy_build_info{job="manypy"})', 1)
        self.assertGreater(self.prometheus.value('process_resident_memory_bytes{job="manypy"}'), 100e6)
        self.assertGreater(self.prometheus.value('process_open_fds{job="manypy"}'), 3)
        self.assertGreater(self.prometheus.value('manypy_model_load_duration_seconds{model="failing"}'), 0)
        self.assertGreater(self.prometheus.value(
            'sum(manypy_interpreter_busy_seconds_total{job="manypy"})'), 1.4)  # slow ran 1.5 s

    def test_every_dashboard_panel_returns_data(self):
        self.wait_for('manypy_executions_total{model="batched_double"}',
                      self.statistics["batched_double"]["execution_count"])
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        variables = {"$job": "manypy", "$model": ".*", "$__rate_interval": "1m", "$__range": "5m"}
        exprs = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p["targets"]]
        self.assertGreaterEqual(len(exprs), 12)
        substituted = []
        for title, expr in exprs:
            for name, value in variables.items():
                expr = expr.replace(name, value)
            self.assertNotIn("$", expr, title)
            substituted.append((title, expr))
        # rate() needs two scrapes of a series inside its window.
        self.wait_for('count_over_time(manypy_build_info{job="manypy"}[1m]) > 3', None, absent_ok=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(self.prometheus.query(expr) for _, expr in substituted):
                break
            time.sleep(1)
        for title, expr in substituted:
            with self.subTest(panel=title, expr=expr):
                self.assertTrue(self.prometheus.query(expr), f"panel '{title}': {expr} returned no data")

    def test_alert_rules_load_in_prometheus(self):
        url = f"http://127.0.0.1:{self.prometheus.port}/api/v1/rules"
        with urllib.request.urlopen(url, timeout=10) as r:
            groups = json.load(r)["data"]["groups"]
        rules = [rule for g in groups for rule in g["rules"]]
        self.assertGreaterEqual(len(rules), 10)
        for rule in rules:
            self.assertEqual(rule["health"], "ok", rule)


if __name__ == "__main__":
    unittest.main()
