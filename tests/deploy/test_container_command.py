"""The server honours every flag and port deploy/ gives it: for each container
command line (the image's ENTRYPOINT + CMD, each Deployment's, the KServe
runtime's), start the built manypy-server with exactly those arguments, only
the paths mapped into a temporary folder (the server and its shim laid out as
in the image) and the ports made free ones, as the
image's non-root user (when the test runs as root) over a read-only model
repository; then probe the routes the manifests' probes and the image's
HEALTHCHECK use, read the metrics the autoscaler needs, and stop it with
SIGTERM while a request is in flight, as Kubernetes does."""
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import yaml

import deploy_util as d

SERVER = os.environ["MANYPY_SERVER_BINARY"]
TEST_REPOSITORY = os.environ["MANYPY_TEST_REPOSITORY"]
MODELS = ("slow.mpk", "echo_all.mpk")
IMAGE_PATHS = {"model-repository": ("/models", "/mnt/models"), "cache-dir": ("/var/cache/manypy",)}
PORT_FLAGS = ("http-port", "grpc-port", "metrics-port")
STARTUP_S = 300


def default_ports():
    """The server's own defaults, from its --help (8000, 8001, 8002)."""
    text = subprocess.run([SERVER, "--help"], check=True, capture_output=True, text=True).stdout
    out = {}
    for flag in PORT_FLAGS:
        m = re.search(r"--" + flag + r"=PORT.*?\(default (\d+)", text, re.S)
        out[flag] = m.group(1)
    return out


def snapshot(folder):
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            out[name] = (os.stat(path).st_mtime_ns, hashlib.sha256(f.read()).hexdigest())
    return out


def image_user():
    user = d.Dockerfile().instructions("USER")[0]
    uid, _, gid = user.partition(":")
    return int(uid), int(gid or uid)


def http_get(port, path, conn=None):
    c = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        if conn is None:
            c.close()


def slow_request(port, ms):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"inputs": [{"name": "MS", "shape": [1, 1], "datatype": "INT64", "data": [ms]}]})
    try:
        c.request("POST", "/v2/models/slow/infer", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


class ContainerCommandLines(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="manypy-deploy-")
        os.chmod(cls.tmp, 0o755)  # the image's user reads the repositories in it
        cls.defaults = default_ports()
        # The image's layout (Dockerfile: /stage/opt/manypy): bin/manypy-server,
        # libexec/manypy-serving and lib/libmanypy_shim.so, nothing else of the build tree.
        cls.server = os.path.join(cls.tmp, "opt", "manypy", "bin", "manypy-server")
        built = os.path.dirname(os.path.dirname(SERVER))
        for folder, name in (("bin", "manypy-server"), ("libexec", "manypy-serving"),
                             ("lib", "libmanypy_shim.so")):
            os.makedirs(os.path.join(cls.tmp, "opt", "manypy", folder))
            shutil.copy2(os.path.join(built, folder, name), os.path.join(cls.tmp, "opt", "manypy", folder))
        cls.as_root = os.geteuid() == 0
        cls.uid, cls.gid = image_user()
        # One writable cache for every start (the image's /var/cache/manypy).
        cls.cache = os.path.join(cls.tmp, "cache")
        os.mkdir(cls.cache)
        if cls.as_root:
            os.chown(cls.cache, cls.uid, cls.gid)
        with open(os.path.join(d.KUBERNETES, "prometheus-adapter", "config.yaml")) as f:
            cls.adapter_series = [re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", r["seriesQuery"].strip("'")).group(0)
                                  for r in yaml.safe_load(f)["rules"]]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def repository(self, label):
        repo = os.path.join(self.tmp, re.sub(r"[^a-z0-9]+", "-", label.lower()))
        os.mkdir(repo)
        for name in MODELS:
            shutil.copy(os.path.join(TEST_REPOSITORY, name), repo)
            os.chmod(os.path.join(repo, name), 0o444)
        os.chmod(repo, 0o555)
        return repo

    def localize(self, argv, repo):
        """argv with the image's paths mapped here and the ports made 0 (free)."""
        self.assertTrue(argv[0].endswith("/manypy-server"), argv)
        args, original_ports = [], dict(self.defaults)
        given = d.flags(argv[1:])
        for flag, value in given.items():
            if flag == "model-repository":
                self.assertIn(value, IMAGE_PATHS[flag])
                value = repo
            elif flag == "cache-dir":
                self.assertIn(value, IMAGE_PATHS[flag])
                value = self.cache
            elif flag in PORT_FLAGS:
                original_ports[flag] = value
                value = "0"
            args.append(f"--{flag}={value}")
        args += [f"--{flag}=0" for flag in PORT_FLAGS if flag not in given]
        return [self.server] + args, original_ports, given

    def start(self, argv, label):
        out = open(os.path.join(self.tmp, label + ".out"), "w+")
        err = open(os.path.join(self.tmp, label + ".err"), "w+")
        self.addCleanup(out.close)
        self.addCleanup(err.close)
        env = dict(os.environ, HOME=self.cache)
        env.pop("MANYPY_CACHE_DIR", None)
        if self.as_root:
            argv = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"] + argv
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        deadline = time.time() + STARTUP_S
        while time.time() < deadline:
            out.seek(0)
            text = out.read()
            m = re.search(r"listening on [^:]+:(\d+), (\d+) model\(s\) ready, (\d+) interpreters", text)
            if m:
                ports = {"grpc-port": int(m.group(1)),
                         "http-port": int(re.search(r"HTTP listening on [^:]+:(\d+)", text).group(1)),
                         "metrics-port": int(re.search(r"metrics listening on \S+:(\d+)/metrics", text).group(1))}
                return proc, ports, int(m.group(2)), int(m.group(3)), err
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        err.seek(0)
        self.fail(f"{label}: server did not start (exit {proc.poll()}): {err.read()[-3000:]}")

    def probes(self, label, container, original_ports):
        """(what, path, original port number) for every HTTP probe deploy/ defines."""
        if container is None:  # the image's HEALTHCHECK
            health = d.Dockerfile().instructions("HEALTHCHECK")[0]
            m = re.search(r"http://127\.0\.0\.1:(\d+)(/[^'\"]+)", health)
            return [("HEALTHCHECK", m.group(2), m.group(1))]
        named = {p["name"]: str(p["containerPort"]) for p in container.get("ports", [])}
        out = []
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            if kind in container:
                get = container[kind]["httpGet"]
                port = str(get["port"])
                out.append((kind, get["path"], named.get(port, port)))
        self.assertTrue(out, f"{label}: no HTTP probes")
        return out

    def test_every_container_command_line(self):
        seen = set()
        specs = d.container_specs()
        self.assertGreaterEqual(len(specs), 3)
        for label, argv, container, _ in specs:
            if tuple(argv) in seen:
                continue
            seen.add(tuple(argv))
            with self.subTest(container=label):
                self.run_one(label, argv, container)

    def run_one(self, label, argv, container):
        repo = self.repository(label)
        before = snapshot(repo)
        local, original_ports, given = self.localize(argv, repo)
        safe = re.sub(r"[^a-z0-9]+", "-", label.lower())
        proc, ports, ready_models, interpreters, err = self.start(local, safe)
        # On demand, the server is ready with nothing loaded: the slow request
        # below loads its model.
        on_demand = "--model-control-mode=on-demand" in argv
        self.assertEqual(ready_models, 0 if on_demand else len(MODELS))
        # Without --interpreters the pool follows the CPU limit, and says so.
        err.seek(0)
        log = err.read()
        m = re.search(r"interpreters: (\d+) \(one per CPU\); (\d+) CPU\(s\)", log)
        self.assertIsNotNone(m, log[-2000:])
        self.assertEqual(int(m.group(1)), interpreters)
        self.assertEqual(int(m.group(2)), interpreters)
        self.assertLessEqual(interpreters, len(os.sched_getaffinity(0)))

        # The probes' routes on the ports the probes name.
        by_original = {original_ports[f]: f for f in PORT_FLAGS}
        for what, path, port in self.probes(label, container, original_ports):
            flag = by_original.get(port)
            self.assertEqual(flag, "http-port", f"{label} {what} probes port {port}, not the HTTP port")
            status, body = http_get(ports[flag], path)
            self.assertEqual(status, 200, f"{label} {what} {path}: {body!r}")
        if container is None:
            # The HEALTHCHECK command itself, its port made this run's.
            health = d.Dockerfile().instructions("HEALTHCHECK")[0]
            cmd = json.loads(health[health.index("CMD") + 3:].strip())
            cmd = [c.replace(":" + original_ports["http-port"] + "/", f":{ports['http-port']}/") for c in cmd]
            self.assertEqual(subprocess.run(cmd, capture_output=True).returncode, 0, cmd)
        with socket.create_connection(("127.0.0.1", ports["grpc-port"]), timeout=10):
            pass

        # A request in flight when SIGTERM comes is answered; readiness turns
        # false at once; the process ends 0 within the grace period.
        held = http.client.HTTPConnection("127.0.0.1", ports["http-port"], timeout=30)
        self.addCleanup(held.close)
        self.assertEqual(http_get(ports["http-port"], "/v2/health/ready", held)[0], 200)
        result = {}
        running = threading.Thread(target=lambda: result.update(r=slow_request(ports["http-port"], 2000)))
        running.start()
        metrics_url_port = ports["metrics-port"]
        deadline = time.time() + 20
        while time.time() < deadline:
            _, metrics = http_get(metrics_url_port, "/metrics")
            if re.search(rb'manypy_in_flight_executions\{model="slow",version="1"\} 1', metrics):
                break
            time.sleep(0.05)
        else:
            self.fail("the slow request never ran")
        for series in self.adapter_series:  # what prometheus-adapter reads
            self.assertRegex(metrics.decode(), r"(?m)^" + series + r"\{", series)
        grace = int(given.get("grace-period", 30))
        sigterm = time.time()
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        self.assertEqual(http_get(ports["http-port"], "/v2/health/ready", held)[0], 503)
        running.join(timeout=grace + 10)
        self.assertEqual(result["r"][0], 200, result["r"][1])
        self.assertEqual(proc.wait(timeout=grace + 10), 0)
        self.assertLess(time.time() - sigterm, grace)

        # Nothing was written into the model repository.
        self.assertEqual(snapshot(repo), before)


if __name__ == "__main__":
    unittest.main()
