"""manypy-package CLI (python3 -m manypy.cli), run as a subprocess with /usr/bin/python3."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MANYPY_PYTHON = os.path.join(REPO, "package_format", "python")
sys.path.insert(0, MANYPY_PYTHON)
PYTHON = "/usr/bin/python3"

import torch  # noqa: E402

import manypy.package as P  # noqa: E402

NET = textwrap.dedent('''\
    """A user's model file for the CLI tests."""
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return torch.relu(self.fc(x))


    def build():
        torch.manual_seed(0)
        return Net().eval()
    ''')


def run_cli(args, env=None, cwd=None, pythonpath=MANYPY_PYTHON):
    full_env = dict(os.environ if env is None else env)
    full_env["PYTHONPATH"] = pythonpath
    return subprocess.run([PYTHON, "-m", "manypy.cli"] + args, capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


class CliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="manypy-cli-test-")
        cls.net = os.path.join(cls.tmp, "net.py")
        with open(cls.net, "w") as f:
            f.write(NET)
        # Trained weights: differ from build()'s, so the test sees they were loaded.
        sys.path.insert(0, cls.tmp)
        cls.module = P.import_model_module(cls.net)
        cls.trained = cls.module.build()
        with torch.no_grad():
            cls.trained.fc.weight.mul_(-2.0)
        cls.weights = os.path.join(cls.tmp, "w.pt")
        torch.save(cls.trained.state_dict(), cls.weights)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def create(self, out, *extra):
        args = ["create", "--model-file", self.net, "--factory", "net:build", "--weights", self.weights,
                "--name", "cli_net", "--version", "2", "--input", "INPUT__0:FP32:6",
                "--max-batch-size", "4", "--dynamic-batching", "--preferred-batch-size", "2", "4",
                "--max-queue-delay-us", "500", "--instance-count", "3", "-o", out] + list(extra)
        proc = run_cli(args)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("wrote", proc.stdout)
        return P.read_manifest(out)

    def test_create_and_inspect_pickle(self):
        out = os.path.join(self.tmp, "out", "cli_net.mpk")
        manifest = self.create(out, "--output", "OUTPUT__0:FP32:3", "--pickle")
        self.assertEqual(manifest["name"], "cli_net")
        self.assertEqual(manifest["version"], 2)
        self.assertEqual(manifest["entry_point"]["kind"], "pickle")
        self.assertEqual(manifest["inputs"], [{"name": "INPUT__0", "datatype": "FP32", "shape": [6]}])
        self.assertEqual(manifest["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [3]}])
        self.assertEqual(manifest["batching"], {"dynamic": True, "preferred_batch_sizes": [2, 4],
                                                "max_queue_delay_microseconds": 500})
        self.assertEqual(manifest["instance_count"], 3)
        model, _ = P.load_model(out)
        x = torch.randn(2, 6)
        with torch.inference_mode():
            self.assertTrue(torch.equal(model(x), self.trained(x)))  # the weights were loaded

        proc = run_cli(["inspect", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        text = proc.stdout
        start, end = text.index("manifest:\n") + len("manifest:\n"), text.index("\nvariable dimensions (")
        self.assertEqual(json.loads(text[start:end]), manifest)
        self.assertIn("net.py", text)
        self.assertIn("model/model.pkl", text)
        for line in text.splitlines():
            if ".storage" in line:
                self.assertIn("stored", line)
                self.assertTrue(line.rstrip().endswith(" 0"), line)  # offset % 64

    def test_create_infers_outputs_and_as_factory(self):
        out = os.path.join(self.tmp, "factory.mpk")
        manifest = self.create(out, "--as-factory")
        self.assertEqual(manifest["entry_point"], {
            "kind": "factory", "module": "net", "function": "build",
            "weights": {"package": "manypy", "resource": "weights.pkl"}})
        self.assertEqual(manifest["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [3]}])
        with zipfile.ZipFile(out) as zf:
            names = zf.namelist()
        self.assertIn("factory/net.py", names)
        self.assertIn("factory/manypy/weights.pkl", names)
        model, _ = P.load_model(out)
        x = torch.randn(1, 6)
        with torch.inference_mode():
            self.assertTrue(torch.equal(model(x), self.trained(x)))

    def test_create_dynamic_dims(self):
        out = os.path.join(self.tmp, "dynamic.mpk")
        manifest = self.create(out, "--as-factory", "--dynamic-dim", "OUTPUT__0:0",
                               "--check")
        self.assertEqual(manifest["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [-1]}])
        proc = run_cli(["inspect", out])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("OUTPUT__0", proc.stdout[proc.stdout.index("variable dimensions ("):])
        for bad, message in (("OUTPUT__0", "NAME:D1,D2"), ("OUTPUT__0:x", "NAME:D1,D2"),
                             ("OUTPUT__0:3", "dimension 3"), ("nope:0", "'nope'")):
            proc = run_cli(["create", "--model-file", self.net, "--factory", "net:build",
                            "--input", "INPUT__0:FP32:6", "--dynamic-dim", bad, "-o", out + ".bad"])
            self.assertEqual(proc.returncode, 1, bad)
            self.assertIn(message, proc.stderr)
            self.assertFalse(os.path.exists(out + ".bad"))

    def test_create_sequence_batching(self):
        out = os.path.join(self.tmp, "sequence.mpk")
        base = ["create", "--model-file", self.net, "--factory", "net:build", "--name", "seq_net",
                "--input", "INPUT__0:FP32:6", "--output", "OUTPUT__0:FP32:3", "-o", out]
        proc = run_cli(base + ["--sequence-batching", "--sequence-idle-us", "2000"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(P.read_manifest(out)["sequence_batching"],
                         {"max_sequence_idle_microseconds": 2000})
        proc = run_cli(base + ["--sequence-batching"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(P.read_manifest(out)["sequence_batching"], {})
        proc = run_cli(base + ["--sequence-batching", "--max-batch-size", "4", "--dynamic-batching"])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("cannot also batch dynamically", proc.stderr)

    def test_create_openai_is_checked_against_the_signature(self):
        out = os.path.join(self.tmp, "openai.mpk")
        declaration = os.path.join(self.tmp, "openai.json")
        with open(declaration, "w") as f:
            json.dump({"routes": ["embeddings"], "inputs": {"input": "INPUT__0"},
                       "outputs": {"embedding": "OUTPUT__0"}}, f)
        base = ["create", "--model-file", self.net, "--factory", "net:build", "--name", "vec",
                "--input", "INPUT__0:FP32:6", "--output", "OUTPUT__0:FP32:3", "-o", out]
        proc = run_cli(base + ["--openai", declaration])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("openai.inputs.input: route 'embeddings': input 'INPUT__0' is FP32, "
                      "expected BYTES", proc.stderr)
        self.assertFalse(os.path.exists(out))
        proc = run_cli(base + ["--openai", os.path.join(self.tmp, "missing.json")])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--openai: cannot read", proc.stderr)

    def test_create_errors(self):
        out = os.path.join(self.tmp, "bad.mpk")
        proc = run_cli(["create", "--model-file", self.net, "--factory", "net:build",
                        "--input", "INPUT__0:FP99:6", "-o", out])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("datatype", proc.stderr)
        proc = run_cli(["create", "--model-file", self.net, "--factory", "net:nope",
                        "--input", "INPUT__0:FP32:6", "-o", out])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("nope", proc.stderr)
        proc = run_cli(["create", "--model-file", self.net, "--factory", "net:build",
                        "--input", "INPUT__0:FP32:6", "--output", "OUTPUT__0:FP32:7", "--check", "-o", out])
        self.assertEqual(proc.returncode, 1)
        self.assertIn("outputs[0].shape", proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_factory_by_module_name_from_cwd(self):
        out = os.path.join(self.tmp, "byname.mpk")
        proc = run_cli(["create", "--factory", "net:build", "--input", "X:FP32:6", "-o", out], cwd=self.tmp)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(P.read_manifest(out)["name"], "byname")

    def test_validate_runs_checker_and_passes_status_through(self):
        out = os.path.join(self.tmp, "v.mpk")
        P.export(self.trained, out, inputs=[("X", "FP32", [6])], outputs=[("Y", "FP32", [3])], max_batch_size=1)
        fake = os.path.join(self.tmp, "fake-check")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\necho "fake checker: $1: outputs[0].shape: bad"\nexit 3\n')
        os.chmod(fake, 0o755)
        env = dict(os.environ, MANYPY_ARCHIVE_CHECK=fake)
        proc = run_cli(["validate", out], env=env)
        self.assertEqual(proc.returncode, 3)
        self.assertIn(f"fake checker: {out}: outputs[0].shape: bad", proc.stdout)

        proc = run_cli(["validate", "--python-only", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)

    def test_validate_without_checker_exits_2(self):
        # A copy of the package outside the repository, so no build/bin is near it.
        copy_root = os.path.join(self.tmp, "isolated")
        shutil.copytree(os.path.join(MANYPY_PYTHON, "manypy"), os.path.join(copy_root, "manypy"),
                        dirs_exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "MANYPY_ARCHIVE_CHECK"}
        env["PATH"] = "/nonexistent"
        proc = run_cli(["validate", "whatever.mpk"], env=env, pythonpath=copy_root)
        self.assertEqual(proc.returncode, 2)
        self.assertIn("manypy-archive-check not found", proc.stderr)

    def test_validate_with_real_checker(self):
        checker = os.environ.get("MANYPY_ARCHIVE_CHECK") or os.path.join(
            REPO, "build", "bin", "manypy-archive-check")
        if not os.access(checker, os.X_OK):
            self.skipTest(f"{checker} is not built")
        env = dict(os.environ, MANYPY_ARCHIVE_CHECK=checker)
        out = os.path.join(self.tmp, "real.mpk")
        P.export(self.trained, out, inputs=[("X", "FP32", [6])], outputs=[("Y", "FP32", [3])], max_batch_size=1)
        proc = run_cli(["validate", out], env=env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # A manifest the Python side would never write (an unknown field) is refused.
        # (torch.nn.Identity has no storages, so rewriting the zip keeps it aligned.)
        out = os.path.join(self.tmp, "real.mpk")
        P.export(torch.nn.Identity(), out, inputs=[("X", "FP32", [6])], outputs=[("Y", "FP32", [6])])
        bad = os.path.join(self.tmp, "bad_manifest.mpk")
        with zipfile.ZipFile(out) as src, zipfile.ZipFile(bad, "w", zipfile.ZIP_STORED) as dst:
            for info in src.infolist():
                data = src.read(info)
                if info.filename.endswith("manypy/manifest.json"):
                    manifest = json.loads(data)
                    manifest["max_batch_sise"] = 4
                    data = json.dumps(manifest).encode()
                dst.writestr(info.filename.replace("real/", "bad_manifest/", 1), data)
        proc = run_cli(["validate", bad], env=env)
        self.assertNotEqual(proc.returncode, 0, proc.stdout)
        self.assertIn("max_batch_sise", proc.stdout + proc.stderr)

    def test_launcher(self):
        launcher = os.environ.get("MANYPY_PACKAGE_LAUNCHER") or os.path.join(REPO, "build", "bin", "manypy-package")
        if not os.access(launcher, os.X_OK):
            self.skipTest(f"{launcher} is not generated (configure with cmake)")
        with open(launcher) as f:
            self.assertEqual(f.readline().strip(), "#!/usr/bin/python3")
        out = os.path.join(self.tmp, "launched.mpk")
        P.export(self.trained, out, inputs=[("X", "FP32", [6])], outputs=[("Y", "FP32", [3])], max_batch_size=1)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run([launcher, "inspect", out], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn('"name": "launched"', proc.stdout)


if __name__ == "__main__":
    unittest.main()
