"""AOTInductor archives (format "aoti", platform torch_aoti; issue 41): on
PyTorch >= 2.6 the compiled model answers as eager PyTorch at every batch size
up to max_batch_size, the manifest comes from the exported program, and what
torch.export cannot capture is refused with export's reason; on an older
PyTorch (Debian 12's 1.13) the format is refused naming the version.

Its own ctest (python_aoti_tests), apart from python_package_tests: each
archive is a C++ compile of about 15 s on 2 cores.
"""
import os
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

import manypy.aoti as A  # noqa: E402
import manypy.load_check as L  # noqa: E402
import manypy.package as P  # noqa: E402

NEEDS_2_6 = unittest.skipIf(A.torch_problem() is not None, f"{A.torch_problem()}")

NET = textwrap.dedent('''\
    """A user's model file: two outputs, one of them named by a dict key."""
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return {"PROBS": torch.softmax(self.fc(x), dim=1), "NORM": x.norm(dim=1, keepdim=True)}


    def build():
        torch.manual_seed(0)
        return Net().eval()
    ''')


class Heads(torch.nn.Module):
    """Outputs in an order the user declares differently (dict: by key)."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 4)
        self.b = torch.nn.Linear(8, 2)

    def forward(self, x, y):
        h = torch.relu(self.a(x)) + y
        return {"H": h, "G": self.b(x).sigmoid()}


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # Python control flow on a tensor's value
            return x * 2
        return x


def run_cli(args, cwd=None):
    env = dict(os.environ, PYTHONPATH=MANYPY_PYTHON)
    return subprocess.run([PYTHON, "-m", "manypy.cli"] + args, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


class AotiArchiveTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        torch.manual_seed(0)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    @NEEDS_2_6
    def test_compiled_archive_answers_as_eager_at_every_batch_size(self):
        model = Heads().eval()
        x, y = torch.randn(1, 8), torch.randn(1, 4)
        manifest = P.export(model, self.path("heads.mpk"), format="aoti", example_inputs=(x, y),
                            outputs=[("G", "FP32", [2]), ("H", "FP32", [4])],
                            max_batch_size=6, batching=True)
        self.assertEqual(manifest["platform"], "torch_aoti")
        self.assertEqual(manifest["entry_point"],
                         {"kind": "aoti", "package": "model", "resource": "model.pt2"})
        self.assertEqual(manifest["packaged_with"]["torch"], torch.__version__)
        # The compiled model returns the dict's values in the model's order: H, G.
        self.assertEqual([o["name"] for o in manifest["outputs"]], ["H", "G"])
        self.assertEqual([i["shape"] for i in manifest["inputs"]], [[8], [4]])
        P.check_archive(self.path("heads.mpk"))
        loaded, read = A.load(self.path("heads.mpk"))
        self.assertEqual(read, manifest)
        for batch in (1, 2, 5, 6):
            xb, yb = torch.randn(batch, 8), torch.randn(batch, 4)
            with torch.inference_mode():
                want = model(xb, yb)
            got = loaded(xb, yb)
            for name, value in zip(["H", "G"], got):
                self.assertEqual(value.shape, want[name].shape, (batch, name))
                self.assertTrue(torch.allclose(value, want[name], rtol=A.RTOL, atol=A.ATOL),
                                (batch, name, (value - want[name]).abs().max()))

    @NEEDS_2_6
    def test_the_package_is_stored_beside_the_manifest_uncompressed(self):
        P.export(torch.nn.Linear(4, 2), self.path("lin.mpk"), format="aoti",
                 example_inputs=(torch.randn(1, 4),), max_batch_size=4)
        with zipfile.ZipFile(self.path("lin.mpk")) as zf:
            infos = {i.filename.split("/", 1)[1]: i for i in zf.infolist()}
        self.assertIn("manypy/manifest.json", infos)
        self.assertEqual(infos["model/model.pt2"].compress_type, zipfile.ZIP_STORED)
        with zipfile.ZipFile(self.path("lin.mpk")) as zf, \
                zf.open("lin/model/model.pt2") as pt2, zipfile.ZipFile(pt2) as inner:
            self.assertTrue(any(n.endswith(".so") for n in inner.namelist()), inner.namelist())

    @NEEDS_2_6
    @unittest.skipUnless(torch.backends.mkldnn.is_available(), "oneDNN (mkldnn) is not built in")
    def test_convolutions_with_a_dynamic_batch_are_prepacked_once(self):
        # Inductor prepacks a convolution's weight only for a static input
        # shape; aoti_prepack packs it for the traced one, keeping one copy.
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2), torch.nn.ReLU(), torch.nn.Flatten(1)).eval()
        inputs = [{"name": "X", "datatype": "FP32", "shape": [3, 12, 12]}]
        exported = A.export_program(model, (torch.randn(1, 3, 12, 12),), inputs, 4)
        sizes = {}
        for label, configs in (("packed", None), ("plain", {"post_grad_custom_pre_pass": None})):
            pt2 = self.path(f"{label}.pt2")
            packed = A.compile_package(exported, pt2, configs)
            self.assertEqual(packed, 2 if label == "packed" else 0)
            with zipfile.ZipFile(pt2) as zf:
                sizes[label] = sum(i.file_size for i in zf.infolist() if i.filename.endswith(".so"))
            loaded = torch._inductor.aoti_load_package(pt2)
            for batch in (1, 3, 4):
                x = torch.randn(batch, 3, 12, 12)
                with torch.inference_mode():
                    want, got = model(x), loaded.loader.run([x])[0]
                self.assertTrue(torch.allclose(got, want, rtol=A.RTOL, atol=A.ATOL),
                                (label, batch, (got - want).abs().max()))
        # The plain weights are not kept beside the packed ones (76 KiB of
        # weights: both copies would add that much).
        weights = sum(p.numel() * 4 for p in model.parameters())
        self.assertLess(sizes["packed"] - sizes["plain"], weights // 2, sizes)

    @NEEDS_2_6
    def test_what_export_cannot_capture_is_refused_with_its_reason(self):
        with self.assertRaises(ValueError) as caught:
            P.export(DataDependent(), self.path("dd.mpk"), format="aoti",
                     example_inputs=(torch.randn(1, 4),), max_batch_size=4)
        text = str(caught.exception)
        self.assertIn("torch.export cannot capture the model", text)
        self.assertIn("x.sum() > 0", text)  # export's own reason, naming the line
        self.assertIn("Python platform", text)
        self.assertFalse(os.path.exists(self.path("dd.mpk")))

    @NEEDS_2_6
    def test_strings_and_python_only_arguments_are_refused(self):
        class Echo(torch.nn.Module):
            def forward(self, x):
                return x
        with self.assertRaisesRegex(ValueError, "BYTES; the torch_aoti platform takes tensors"):
            P.export(Echo(), self.path("s.mpk"), format="aoti", inputs=[("T", "BYTES", [1])],
                     outputs=[("U", "BYTES", [1])], example_inputs=([[b"a"]],),
                     max_batch_size=2)
        with self.assertRaisesRegex(ValueError, "intern: a 'aoti' archive holds compiled code"):
            P.export(Echo(), self.path("s.mpk"), format="aoti", intern=["**"],
                     example_inputs=(torch.ones(1, 2),), max_batch_size=2)
        with self.assertRaisesRegex(ValueError, "format: must be one of"):
            P.export(Echo(), self.path("s.mpk"), format="onnx",
                     example_inputs=(torch.ones(1, 2),))

    @NEEDS_2_6
    def test_a_method_other_than_forward_is_what_is_compiled(self):
        class TwoWays(torch.nn.Module):
            def forward(self, x, y):
                return x - y

            def predict(self, x, y):
                return x * y + 1

        x, y = torch.randn(1, 3), torch.randn(1, 3)
        manifest = P.export(TwoWays(), self.path("m.mpk"), format="aoti", method="predict",
                            example_inputs=(x, y), max_batch_size=4)
        self.assertNotIn("method", manifest)  # the package is the method: nothing to name
        loaded, _ = A.load(self.path("m.mpk"))
        xb, yb = torch.randn(3, 3), torch.randn(3, 3)
        self.assertTrue(torch.allclose(loaded(xb, yb)[0], xb * yb + 1))

    @NEEDS_2_6
    def test_load_check_refuses_a_package_that_answers_otherwise(self):
        # Inductor's own fault injection: its compiled relu is made wrong.
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
        with self.assertRaisesRegex(L.LoadCheckError, "outputs differ from the eager model's"):
            A.export(model, self.path("bad.mpk"), example_inputs=(torch.randn(1, 4),),
                     max_batch_size=4,
                     inductor_configs={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"})
        self.assertFalse(os.path.exists(self.path("bad.mpk")))

    @NEEDS_2_6
    def test_factory_form_and_cli_compile_the_same_model(self):
        net = self.path("net.py")
        with open(net, "w") as f:
            f.write(NET)
        manifest = P.export_factory(net, "build", path=self.path("api.mpk"), format="aoti",
                                    example_inputs=(torch.randn(1, 6),), max_batch_size=4)
        self.assertEqual([o["name"] for o in manifest["outputs"]], ["PROBS", "NORM"])
        proc = run_cli(["create", "--model-file", net, "--factory", "build", "--format", "aoti",
                        "--input", "INPUT__0:FP32:6", "--max-batch-size", "4",
                        "--dynamic-batching", "-o", self.path("cli.mpk")], cwd=self.tmp.name)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("AOTIModelPackageLoader", proc.stdout)
        cli_manifest = P.read_manifest(self.path("cli.mpk"))
        self.assertEqual(cli_manifest["platform"], "torch_aoti")
        self.assertEqual(cli_manifest["outputs"], manifest["outputs"])
        x = torch.randn(3, 6)
        a, _ = A.load(self.path("api.mpk"))
        b, _ = A.load(self.path("cli.mpk"))
        for u, v in zip(a(x), b(x)):
            self.assertTrue(torch.equal(u, v))
        proc = run_cli(["validate", "--python-only", "--load", self.path("cli.mpk")])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("AOTIModelPackageLoader", proc.stdout)


class OlderTorchTest(unittest.TestCase):
    def test_versions_before_2_6_are_refused_by_name(self):
        self.assertIsNone(A.torch_problem("2.6.0+debian"))
        self.assertIsNone(A.torch_problem("2.7.1"))
        self.assertRegex(A.torch_problem("1.13.1"), r"needs PyTorch 2\.6 or newer .*PyTorch 1\.13\.1")
        self.assertRegex(A.torch_problem("2.5.1"), r"PyTorch 2\.5\.1")

    @unittest.skipIf(A.torch_problem() is None, "this PyTorch packages AOTInductor archives")
    def test_this_older_torch_refuses_the_format(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaisesRegex(ValueError, f"PyTorch {torch.__version__}"):
                P.export(torch.nn.Linear(2, 2), os.path.join(tmp, "x.mpk"), format="aoti",
                         example_inputs=(torch.ones(1, 2),), max_batch_size=2)
            net = os.path.join(tmp, "net.py")
            with open(net, "w") as f:
                f.write(NET)
            proc = run_cli(["create", "--model-file", net, "--factory", "build", "--format",
                            "aoti", "--input", "INPUT__0:FP32:6", "--max-batch-size", "2",
                            "-o", os.path.join(tmp, "net.mpk")], cwd=tmp)
            self.assertEqual(proc.returncode, 1)
            self.assertIn(f"needs PyTorch 2.6 or newer", proc.stderr)
            self.assertIn(torch.__version__, proc.stderr)
            self.assertFalse(os.path.exists(os.path.join(tmp, "net.mpk")))


if __name__ == "__main__":
    unittest.main()
