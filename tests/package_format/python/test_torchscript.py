"""Archives for the torchscript platform (manypy.torchscript, `create --torchscript`):
the module runs as TorchScript with the results of eager PyTorch, the manifest
names the platform, and what the platform cannot serve is refused by name."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MANYPY_PYTHON = os.path.join(REPO, "package_format", "python")
sys.path.insert(0, MANYPY_PYTHON)

import torch  # noqa: E402

import manypy.package as P  # noqa: E402
import manypy.torchscript as T  # noqa: E402


class TwoHeads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        if bool((x < -100).any()):  # data-dependent control flow: script keeps it
            raise ValueError("input below -100")
        return {"LOGITS": self.fc(x), "NORM": x.abs().sum(dim=1, keepdim=True)}


class TorchScriptExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        torch.manual_seed(0)
        self.model = TwoHeads().eval()
        self.x = torch.randn(4, 6)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def test_scripted_archive_matches_eager_and_names_its_platform(self):
        manifest = T.export(self.model, self.path("heads.mpk"), example_inputs=(self.x[:1],),
                            max_batch_size=8, batching=True)
        self.assertEqual(manifest["platform"], "torchscript")
        self.assertEqual(manifest["entry_point"],
                         {"kind": "torchscript", "package": "model", "resource": "model.pt"})
        self.assertEqual([o["name"] for o in manifest["outputs"]], ["LOGITS", "NORM"])
        self.assertEqual(manifest["outputs"][0]["shape"], [3])
        P.check_archive(self.path("heads.mpk"))  # the Python subset of the format rules
        module, read = T.load(self.path("heads.mpk"))
        self.assertEqual(read, manifest)
        with torch.inference_mode():
            got, want = module(self.x), self.model(self.x)
        self.assertTrue(torch.equal(got["LOGITS"], want["LOGITS"]))
        self.assertTrue(torch.equal(got["NORM"], want["NORM"]))
        with self.assertRaisesRegex(Exception, "input below -100"):
            module(torch.full((1, 6), -1000.0))

    def test_traced_archive_needs_examples(self):
        with self.assertRaisesRegex(ValueError, "example_inputs: mode 'trace'"):
            T.export(torch.nn.Linear(2, 2), self.path("t.mpk"), mode="trace",
                     inputs=[("X", "FP32", [2])], outputs=[("Y", "FP32", [2])])
        manifest = T.export(torch.nn.Linear(2, 2), self.path("t.mpk"), mode="trace",
                            example_inputs=(torch.randn(1, 2),), max_batch_size=4)
        self.assertEqual(manifest["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32",
                                                "shape": [2]}])

    def test_unscriptable_model_and_bytes_are_refused_by_name(self):
        class Opaque(torch.nn.Module):
            def forward(self, x):
                return torch.tensor([len(str(x.__class__))])  # not TorchScript
        with self.assertRaisesRegex(ValueError, "torch.jit.script could not compile"):
            T.export(Opaque(), self.path("o.mpk"), example_inputs=(torch.zeros(1),))

        class Echo(torch.nn.Module):
            def forward(self, x):
                return x
        with self.assertRaisesRegex(ValueError, r"inputs\[0\].datatype: BYTES"):
            T.export(Echo(), self.path("b.mpk"), inputs=[("S", "BYTES", [1])],
                     outputs=[("S", "BYTES", [1])])
        self.assertFalse(os.path.exists(self.path("b.mpk")))

    def test_cli_create_torchscript(self):
        with open(self.path("net.py"), "w") as f:
            f.write(textwrap.dedent('''\
                import torch
                def build():
                    torch.manual_seed(0)
                    return torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.ReLU())
                '''))
        env = dict(os.environ, PYTHONPATH=MANYPY_PYTHON)
        out = self.path("net-ts.mpk")
        proc = subprocess.run(
            ["/usr/bin/python3", "-m", "manypy.cli", "create", "--model-file",
             self.path("net.py"), "--factory", "build", "--torchscript", "--name", "net_ts",
             "--input", "X:FP32:6", "--max-batch-size", "8", "-o", out],
            cwd=self.tmp.name, env=env, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("torchscript", proc.stdout)
        module, manifest = T.load(out)
        self.assertEqual(manifest["outputs"][0]["shape"], [3])
        torch.manual_seed(0)
        eager = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.ReLU()).eval()
        x = torch.randn(2, 6)
        with torch.inference_mode():
            self.assertTrue(torch.equal(module(x), eager(x)))
        proc = subprocess.run(
            ["/usr/bin/python3", "-m", "manypy.cli", "create", "--model-file",
             self.path("net.py"), "--factory", "build", "--torchscript", "--extern", "scipy",
             "--input", "X:FP32:6", "-o", self.path("x.mpk")],
            cwd=self.tmp.name, env=env, capture_output=True, text=True)
        self.assertEqual(proc.returncode, 1)
        self.assertIn("--extern: a TorchScript archive has no Python modules", proc.stderr)


if __name__ == "__main__":
    unittest.main()
