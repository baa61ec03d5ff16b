"""deploy/kubernetes and deploy/kserve, offline: every kustomization renders
with kubectl, every object passes the Kubernetes API schemas (npm's
kubernetes-models), and the manifests agree with each other and with the
server: ports, probes, drain timing, the HPA's metrics and the adapter's rules
(evaluated by promtool on sample series)."""
import os
import re
import subprocess
import tempfile
import unittest

import yaml

import deploy_util as d

# main.cc: after --grace-period the process exits within 4 s (its backstop),
# plus up to 1 s for the gRPC shutdown.
SERVER_EXIT_AFTER_GRACE_S = 5


class Manifests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rendered = {os.path.relpath(f, d.KUBERNETES): d.render(f) for f in d.kustomizations()}
        cls.kserve = {n: d.load_yaml(os.path.join(d.KSERVE, n)) for n in sorted(os.listdir(d.KSERVE))}

    def test_every_kustomization_renders_and_validates(self):
        self.assertEqual(sorted(self.rendered),
                         ["base", "model-repository", "monitoring", "overlays/example", "overlays/on-demand",
                          "prometheus-adapter"])
        for name, objects in self.rendered.items():
            with self.subTest(kustomization=name):
                self.assertTrue(objects)
                ok, out = d.validate(objects)
                self.assertTrue(ok, out)

    def test_kserve_files_validate(self):
        for name, objects in self.kserve.items():
            with self.subTest(file=name):
                ok, out = d.validate(objects)
                self.assertTrue(ok, out)

    def test_validation_rejects_broken_objects(self):
        # The validators are live: a wrong type, a bad quantity, an unknown kind fail.
        deployment = d.find(self.rendered["base"], "Deployment")
        broken = yaml.safe_load(yaml.safe_dump(deployment))
        broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "http"
        hpa = yaml.safe_load(yaml.safe_dump(d.find(self.rendered["base"], "HorizontalPodAutoscaler")))
        hpa["spec"]["metrics"][0]["pods"]["target"]["averageValue"] = "four"
        runtime = yaml.safe_load(yaml.safe_dump(self.kserve["cluster-serving-runtime.yaml"][0]))
        runtime["spec"]["protocolVersions"].append("v3")
        for obj in (broken, hpa, runtime, {"apiVersion": "example.com/v1", "kind": "Thing"}):
            ok, out = d.validate([obj])
            self.assertFalse(ok, out)

    def test_overlay_has_every_piece(self):
        kinds = {o["kind"] for o in self.rendered["overlays/example"]}
        self.assertLessEqual({"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler",
                              "ServiceMonitor", "Namespace"}, kinds)
        for o in self.rendered["overlays/example"]:
            if o["kind"] != "Namespace":
                self.assertEqual(o["metadata"].get("namespace"), "manypy", o["kind"])

    def check_pod(self, where, objects):
        deployment = d.find(objects, "Deployment")
        pod = deployment["spec"]["template"]
        labels = pod["metadata"]["labels"]
        spec = pod["spec"]
        c = next(c for c in spec["containers"] if "manypy-server" in c["image"])
        f = d.flags(c["args"])
        self.assertNotIn("interpreters", f, "the pool is sized from the CPU limit")
        self.assertIn("cpu", c["resources"]["limits"])
        # Ports: named http/grpc/metrics, numbered as the flags say.
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"http": int(f["http-port"]), "grpc": int(f["grpc-port"]),
                                 "metrics": int(f["metrics-port"])})
        # Probes: the HTTP health routes.
        probes = {k: c[k]["httpGet"] for k in ("startupProbe", "livenessProbe", "readinessProbe")}
        self.assertEqual(probes["readinessProbe"]["path"], "/v2/health/ready")
        self.assertEqual(probes["livenessProbe"]["path"], "/v2/health/live")
        self.assertIn(probes["startupProbe"]["path"], ("/v2/health/live", "/v2/health/ready"))
        for p in probes.values():
            self.assertEqual(p["port"], "http")
        # Drain: preStop sleep, then SIGTERM and --grace-period, then the exit.
        pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
        self.assertEqual(pre_stop[0], "sleep")
        needed = int(pre_stop[1]) + int(f["grace-period"]) + SERVER_EXIT_AFTER_GRACE_S
        self.assertGreaterEqual(spec["terminationGracePeriodSeconds"], needed)
        # The model repository is a read-only mount; the cache is writable.
        mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
        self.assertTrue(mounts[f["model-repository"]].get("readOnly"))
        self.assertFalse(mounts[f["cache-dir"]].get("readOnly", False))
        self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"])
        self.assertTrue(spec["securityContext"]["runAsNonRoot"])
        # PDB and HPA point at these pods.
        for kind in ("PodDisruptionBudget",):
            sel = d.find(objects, kind)["spec"]["selector"]["matchLabels"]
            self.assertLessEqual(sel.items(), labels.items())
        target = d.find(objects, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
        self.assertEqual((target["kind"], target["name"]), ("Deployment", deployment["metadata"]["name"]))
        # Service: named ports to the container's named ports.
        service = d.find(objects, "Service")
        self.assertLessEqual(service["spec"]["selector"].items(), labels.items())
        self.assertEqual({p["name"]: p["targetPort"] for p in service["spec"]["ports"]},
                         {"http": "http", "grpc": "grpc", "metrics": "metrics"})
        return deployment, service

    def test_base_pod(self):
        self.check_pod("base", self.rendered["base"])

    def test_overlay_pod_and_monitor(self):
        objects = self.rendered["overlays/example"]
        deployment, service = self.check_pod("overlays/example", objects)
        monitor = d.find(objects, "ServiceMonitor")
        self.assertLessEqual(monitor["spec"]["selector"]["matchLabels"].items(),
                             service["metadata"]["labels"].items())
        self.assertEqual([e["port"] for e in monitor["spec"]["endpoints"]], ["metrics"])
        # The overlay's init container fills the models volume the server reads.
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.assertIn("emptyDir", volumes["models"])
        self.assertNotIn("persistentVolumeClaim", volumes["models"])
        init = pod["initContainers"][0]
        self.assertEqual([m["name"] for m in init["volumeMounts"]], ["models"])

    def test_on_demand_overlay_budget_fits_its_memory_limit(self):
        # docs/operations.md: limit >= idle server + 1.1 x budget (+ room for requests).
        deployment, _ = self.check_pod("overlays/on-demand", self.rendered["overlays/on-demand"])
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        args = container["args"]
        self.assertIn("--model-control-mode=on-demand", args)
        budget = [a.split("=", 1)[1] for a in args if a.startswith("--model-memory-budget=")]
        self.assertEqual(len(budget), 1, args)
        units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
        number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", budget[0]).groups()
        budget_bytes = float(number) * units.get(unit, 1)
        number, unit = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", container["resources"]["limits"]["memory"]).groups()
        limit_bytes = float(number) * units[unit]
        idle_server_bytes = 512 << 20  # 4 interpreters, measured about 0.4 GiB
        self.assertLessEqual(idle_server_bytes + 1.1 * budget_bytes, limit_bytes)

    def test_base_reads_the_model_repository_claim(self):
        pod = d.find(self.rendered["base"], "Deployment")["spec"]["template"]["spec"]
        claim = {v["name"]: v for v in pod["volumes"]}["models"]["persistentVolumeClaim"]
        self.assertEqual(claim["claimName"], d.find(self.rendered["model-repository"],
                                                    "PersistentVolumeClaim")["metadata"]["name"])

    def test_kserve_runtime(self):
        runtime = d.find(self.kserve["cluster-serving-runtime.yaml"], "ClusterServingRuntime")
        spec = runtime["spec"]
        self.assertLessEqual({"v2", "grpc-v2"}, set(spec["protocolVersions"]))
        self.assertIn("manypy", [m["name"] for m in spec["supportedModelFormats"]])
        c = spec["containers"][0]
        self.assertEqual(c["name"], "kserve-container")
        f = d.flags(c["args"])
        self.assertEqual(f["model-repository"], "/mnt/models")
        self.assertNotIn("interpreters", f)
        self.assertEqual(spec["annotations"]["prometheus.kserve.io/port"], f["metrics-port"])
        self.assertEqual(spec["annotations"]["prometheus.kserve.io/path"], "/metrics")
        self.assertEqual(c["readinessProbe"]["httpGet"]["port"], int(f["http-port"]))
        isvc = d.find(self.kserve["inference-service.yaml"], "InferenceService")
        model = isvc["spec"]["predictor"]["model"]
        self.assertEqual(model["runtime"], runtime["metadata"]["name"])
        self.assertEqual(model["modelFormat"]["name"], "manypy")


class AdapterRules(unittest.TestCase):
    """The HPA's metrics are the adapter's, and each adapter query, expanded as
    prometheus-adapter does for pods p1 and p2 of namespace ns, computes the
    expected per-pod values from sample series (promtool test rules)."""

    def setUp(self):
        with open(os.path.join(d.KUBERNETES, "prometheus-adapter", "config.yaml")) as f:
            self.rules = yaml.safe_load(f)["rules"]
        self.hpa = d.find(d.render(os.path.join(d.KUBERNETES, "base")), "HorizontalPodAutoscaler")

    def test_hpa_metrics_are_served_by_the_adapter(self):
        served = {r["name"]["as"] for r in self.rules}
        for m in self.hpa["spec"]["metrics"]:
            self.assertEqual(m["type"], "Pods")
            self.assertIn(m["pods"]["metric"]["name"], served)

    def expand(self, rule):
        series = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["seriesQuery"].strip("'")).group(0)
        self.assertTrue(re.fullmatch(rule["name"]["matches"], series))
        self.assertEqual(set(rule["resources"]["overrides"]), {"namespace", "pod"})
        query = rule["metricsQuery"]
        for key, value in (("<<.Series>>", series), ("<<.LabelMatchers>>", 'namespace="ns",pod=~"p1|p2"'),
                           ("<<.GroupBy>>", "pod")):
            query = query.replace(key, value)
        self.assertNotIn("<<", query)
        return query

    def test_adapter_queries_under_promtool(self):
        queries = {r["name"]["as"]: self.expand(r) for r in self.rules}
        # p1: two models queueing 3 and 2; p2: 1. Queue time: p1's requests
        # waited 0.5 s each (sum +30/min, count +60/min), p2 was idle.
        series = [
            ('manypy_queued_requests{namespace="ns",pod="p1",model="a",version="1"}', "3x10"),
            ('manypy_queued_requests{namespace="ns",pod="p1",model="b",version="1"}', "2x10"),
            ('manypy_queued_requests{namespace="ns",pod="p2",model="a",version="1"}', "1x10"),
            ('manypy_queued_requests{namespace="other",pod="p1",model="a",version="1"}', "50x10"),
            ('manypy_queue_duration_seconds_sum{namespace="ns",pod="p1",model="a",version="1"}', "0+30x10"),
            ('manypy_queue_duration_seconds_count{namespace="ns",pod="p1",model="a",version="1"}', "0+60x10"),
            ('manypy_queue_duration_seconds_sum{namespace="ns",pod="p2",model="a",version="1"}', "0+0x10"),
            ('manypy_queue_duration_seconds_count{namespace="ns",pod="p2",model="a",version="1"}', "0+0x10"),
        ]
        expected = {
            "manypy_queued_requests": [('{pod="p1"}', 5), ('{pod="p2"}', 1)],
            "manypy_queue_seconds_per_request": [('{pod="p1"}', 0.5), ('{pod="p2"}', 0)],
        }
        self.assertEqual(set(queries), set(expected))
        with tempfile.TemporaryDirectory() as tmp:
            rules = {"groups": [{"name": "adapter", "rules": [
                {"record": f"adapter:{name}", "expr": q} for name, q in queries.items()]}]}
            with open(os.path.join(tmp, "rules.yml"), "w") as f:
                yaml.safe_dump(rules, f)
            test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [{
                    "expr": f"adapter:{name}", "eval_time": "8m",
                    "exp_samples": [{"labels": f"adapter:{name}{labels}", "value": value}
                                    for labels, value in samples]}
                    for name, samples in expected.items()]}]}
            with open(os.path.join(tmp, "test.yml"), "w") as f:
                yaml.safe_dump(test, f)
            promtool = os.environ.get("PROMTOOL", "promtool")
            check = subprocess.run([promtool, "check", "rules", "rules.yml"], cwd=tmp,
                                   capture_output=True, text=True)
            self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
            r = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


class CollectorConfig(unittest.TestCase):
    """deploy/opentelemetry/collector.yaml: a traces pipeline whose OTLP/HTTP
    receiver listens where manypy-server exports by default (:4318)."""

    def test_traces_pipeline_takes_otlp_http_on_the_servers_default_port(self):
        config = d.load_yaml(os.path.join(d.DEPLOY, "opentelemetry", "collector.yaml"))[0]
        http = config["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
        self.assertTrue(http.endswith(":4318"), http)
        pipeline = config["service"]["pipelines"]["traces"]
        self.assertEqual(pipeline["receivers"], ["otlp"])
        for kind in ("processors", "exporters"):
            for name in pipeline[kind]:
                self.assertIn(name, config[kind], f"{kind}: {name} is used but not defined")
        with open(os.path.join(d.SOURCE, "server", "server_options.cc")) as f:
            self.assertIn("http://localhost:4318/v1/traces", f.read())


class Yamllint(unittest.TestCase):
    def test_deploy_is_yamllint_clean(self):
        r = subprocess.run([os.environ.get("YAMLLINT", "yamllint"), "--strict", "-c",
                            os.path.join(d.DEPLOY, ".yamllint"), d.DEPLOY], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


if __name__ == "__main__":
    unittest.main()
