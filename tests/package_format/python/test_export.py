"""manypy.package: export / export_factory round trips through torch.package."""
import inspect
import json
import os
import shutil
import sys
import tempfile
import unittest
import warnings
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "package_format", "python"))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch.package import PackageImporter  # noqa: E402

import manypy.package as P  # noqa: E402
from manypy.load_check import LoadCheckError  # noqa: E402
import sample_helpers  # noqa: E402
import sample_models  # noqa: E402


def entries(path):
    """{name relative to the top folder: ZipInfo}, and the top folder."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    top = infos[0].filename.split("/", 1)[0]
    return {i.filename[len(top) + 1:]: i for i in infos}, top


class ExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="manypy-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_round_trip(self):
        model = sample_models.build()
        path = self.path("tiny.mpk")
        manifest = P.export(model, path, name="tiny", version=3,
                            inputs=[("INPUT__0", "FP32", [16])],
                            outputs=[{"name": "OUTPUT__0", "datatype": "FP32", "shape": [4]}],
                            max_batch_size=8,
                            batching={"dynamic": True, "preferred_batch_sizes": [4, 8],
                                      "max_queue_delay_microseconds": 100},
                            instance_count=2, description="tiny test net")

        # The manifest, as stored.
        files, top = entries(path)
        self.assertEqual(top, "tiny")  # torch.package names the folder after the file
        with zipfile.ZipFile(path) as zf:
            stored = json.loads(zf.read(f"{top}/manypy/manifest.json"))
            source = zf.read(f"{top}/sample_models.py").decode()
            helper_source = zf.read(f"{top}/sample_helpers.py").decode()
            externs = zf.read(f"{top}/.data/extern_modules").decode().split()
        self.assertEqual(stored, manifest)
        self.assertEqual(stored["name"], "tiny")
        self.assertEqual(stored["version"], 3)
        self.assertEqual(stored["platform"], "manypy_python")
        self.assertEqual(stored["entry_point"], {"kind": "pickle", "package": "model", "resource": "model.pkl"})
        self.assertEqual(stored["inputs"], [{"name": "INPUT__0", "datatype": "FP32", "shape": [16]}])
        self.assertEqual(stored["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [4]}])
        self.assertEqual(stored["max_batch_size"], 8)
        self.assertEqual(stored["batching"]["preferred_batch_sizes"], [4, 8])
        self.assertEqual(stored["instance_count"], 2)
        self.assertEqual(stored["device"], "cpu")
        self.assertEqual(P.read_manifest(path), manifest)

        # The user's modules are interned (their source is inside), torch is extern.
        self.assertEqual(source, inspect.getsource(sample_models))
        self.assertEqual(helper_source, inspect.getsource(sample_helpers))
        self.assertIn("torch", externs)
        self.assertFalse([n for n in files if n.startswith("torch/")], "torch must not be interned")
        self.assertIn("model/model.pkl", files)

        # Every storage is stored uncompressed and 64-byte aligned.
        storages = [n for n in files if n.startswith(".data/") and n.endswith(".storage")]
        self.assertEqual(len(storages), 3)  # fc.weight, fc.bias, offset
        for name in storages:
            self.assertEqual(files[name].compress_type, zipfile.ZIP_STORED, name)
            self.assertEqual(P.data_offset(path, files[name]) % 64, 0, name)
        P.check_archive(path)

        # PackageImporter loads a model from the archive's own copy of the code.
        importer = PackageImporter(path)
        loaded = importer.load_pickle("model", "model.pkl")
        self.assertIsNot(type(loaded), sample_models.TinyNet)
        self.assertEqual(type(loaded).__name__, "TinyNet")
        x = torch.randn(5, 16, generator=torch.Generator().manual_seed(1))
        with torch.inference_mode():
            self.assertTrue(torch.equal(loaded(x), model(x)))
        self.assertEqual(importer.load_text("manypy", "manifest.json"),
                         open_text(path, f"{top}/manypy/manifest.json"))

    def test_export_is_deterministic_and_replaces(self):
        a, b = self.path("a/net.mpk"), self.path("b/net.mpk")
        for p in (a, b, b):
            P.export(sample_models.build(), p, inputs=[("X", "FP32", [16])], outputs=[("Y", "FP32", [4])],
                     max_batch_size=2)
        with open(a, "rb") as fa, open(b, "rb") as fb:
            self.assertEqual(fa.read(), fb.read())
        self.assertEqual(sorted(os.listdir(os.path.dirname(b))), ["net.mpk"])  # no temp left
        self.assertEqual(P.read_manifest(a)["name"], "net")  # default name: the file name

    def test_infers_outputs_from_example(self):
        model = sample_models.MultiOut()
        x = torch.randn(2, 3)
        ids = torch.tensor([[1, 2], [3, 4]])
        m = P.export(model, self.path("multi.mpk"), example_inputs=(x, ids), max_batch_size=4,
                     inputs=[("X", "FP32", [3]), ("IDS", "INT64", [2])])
        self.assertEqual(m["outputs"], [
            {"name": "OUTPUT__0", "datatype": "FP32", "shape": [3]},
            {"name": "OUTPUT__1", "datatype": "INT64", "shape": [2]},
            {"name": "OUTPUT__2", "datatype": "BOOL", "shape": []},
        ])
        # inputs inferred too when not given
        m = P.export(model, self.path("multi2.mpk"), example_inputs=(x, ids), max_batch_size=4)
        self.assertEqual(m["inputs"], [{"name": "INPUT__0", "datatype": "FP32", "shape": [3]},
                                       {"name": "INPUT__1", "datatype": "INT64", "shape": [2]}])
        # dict outputs are named by their keys; no batch dimension stripped with max_batch_size 0
        m = P.export(sample_models.DictOut(), self.path("dict.mpk"),
                     inputs=[("X", "FP32", [5])], example_inputs=torch.ones(5))
        self.assertEqual(m["outputs"], [{"name": "DOUBLE", "datatype": "FP32", "shape": [5]},
                                        {"name": "HALF", "datatype": "FP16", "shape": [5]}])
        # BYTES in and out
        m = P.export(sample_models.Echo(), self.path("echo.mpk"), inputs=[("TEXT", "BYTES", [1])],
                     example_inputs=([[b"ab"], [b"cde"]],), max_batch_size=8)
        self.assertEqual(m["outputs"], [{"name": "OUTPUT__0", "datatype": "BYTES", "shape": [1]},
                                        {"name": "OUTPUT__1", "datatype": "INT32", "shape": [1]}])

    def test_checks_declared_signature_against_example(self):
        model = sample_models.build()
        x = torch.randn(2, 16)
        with self.assertRaisesRegex(ValueError, r"^outputs\[0\]\.shape:"):
            P.export(model, self.path("x.mpk"), inputs=[("X", "FP32", [16])], outputs=[("Y", "FP32", [5])],
                     example_inputs=(x,), max_batch_size=8)
        with self.assertRaisesRegex(ValueError, r"^outputs\[0\]\.datatype:"):
            P.export(model, self.path("x.mpk"), inputs=[("X", "FP32", [16])], outputs=[("Y", "FP64", [4])],
                     example_inputs=(x,), max_batch_size=8)
        with self.assertRaisesRegex(ValueError, r"^inputs\[0\]\.datatype:"):
            P.export(model, self.path("x.mpk"), inputs=[("X", "FP64", [16])], outputs=[("Y", "FP32", [4])],
                     example_inputs=(x,), max_batch_size=8)
        with self.assertRaisesRegex(ValueError, r"^outputs:"):
            P.export(sample_models.DictOut(), self.path("x.mpk"), inputs=[("X", "FP32", [5])],
                     outputs=[("DOUBLE", "FP32", [5]), ("THIRD", "FP16", [5])], example_inputs=torch.ones(5))
        # -1 matches any size; declared dict outputs may come in any order
        P.export(model, self.path("ok.mpk"), inputs=[("X", "FP32", [-1])], outputs=[("Y", "FP32", [-1])],
                 example_inputs=(x,), max_batch_size=8, load_check=False)
        # ... but the server warms a model up on zeros with each -1 as 1, which this one
        # cannot take: the load check says so, pointing at the model's line.
        with self.assertRaisesRegex(LoadCheckError, r"warm-up.*mat1 and mat2.* at sample_models\.py:\d+ in forward"):
            P.export(model, self.path("x.mpk"), inputs=[("X", "FP32", [-1])], outputs=[("Y", "FP32", [-1])],
                     example_inputs=(x,), max_batch_size=8)
        P.export(sample_models.DictOut(), self.path("ok2.mpk"), inputs=[("X", "FP32", [5])],
                 outputs=[("HALF", "FP16", [5]), ("DOUBLE", "FP32", [5])], example_inputs=torch.ones(5))
        self.assertFalse(os.path.exists(self.path("x.mpk")))
        with self.assertRaisesRegex(ValueError, r"^outputs:"):
            P.export(model, self.path("x.mpk"), inputs=[("X", "FP32", [16])])

    def test_main_module_is_refused_clearly(self):
        cls = type("ScriptNet", (torch.nn.Module,), {"forward": lambda self, x: x})
        cls.__module__ = "__main__"
        with self.assertRaises(ValueError) as ctx:
            P.export(cls(), self.path("main.mpk"), inputs=[("X", "FP32", [1])], outputs=[("Y", "FP32", [1])])
        self.assertIn("__main__", str(ctx.exception))
        self.assertIn("module", str(ctx.exception))
        self.assertFalse(os.path.exists(self.path("main.mpk")))

    def test_training_mode_warns(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = torch.nn.Sequential(sample_models.TinyNet(), torch.nn.Dropout(0.5))
            P.export(model, self.path("train.mpk"), inputs=[("X", "FP32", [16])],
                     outputs=[("Y", "FP32", [4])], max_batch_size=1)
        self.assertTrue(any("eval()" in str(w.message) for w in caught))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            P.export(model.eval(), self.path("eval.mpk"), inputs=[("X", "FP32", [16])],
                     outputs=[("Y", "FP32", [4])], max_batch_size=1)
        self.assertFalse([w for w in caught if "eval()" in str(w.message)])

    def test_export_factory_with_weights(self):
        trained = sample_models.TinyNet().eval()
        with torch.no_grad():
            for p in trained.parameters():
                p.add_(1.0)  # differs from what build() returns
        weights_file = self.path("w.pt")
        torch.save(trained.state_dict(), weights_file)
        for weights in (trained.state_dict(), weights_file):
            path = self.path("factory.mpk")
            m = P.export_factory(sample_models.__file__, "build", weights, path,
                                 inputs=[("INPUT__0", "FP32", [16])], outputs=[("OUTPUT__0", "FP32", [4])],
                                 max_batch_size=4, name="tiny_factory")
            self.assertEqual(m["entry_point"], {
                "kind": "factory", "module": "sample_models", "function": "build",
                "weights": {"package": "manypy", "resource": "weights.pkl"}})
            files, _ = entries(path)
            self.assertIn("sample_models.py", files)
            self.assertIn("sample_helpers.py", files)
            self.assertIn("manypy/weights.pkl", files)
            self.assertNotIn("model/model.pkl", files)
            for name, info in files.items():
                if name.endswith(".storage"):
                    self.assertEqual(info.compress_type, zipfile.ZIP_STORED)

            importer = PackageImporter(path)
            module = importer.import_module("sample_models")
            model = module.build()
            model.load_state_dict(importer.load_pickle("manypy", "weights.pkl"))
            x = torch.randn(3, 16)
            with torch.inference_mode():
                self.assertTrue(torch.equal(model(x), trained(x)))
                loaded, manifest = P.load_model(path)
                self.assertTrue(torch.equal(loaded(x), trained(x)))
            self.assertEqual(manifest["name"], "tiny_factory")

        # by module name, no weights, outputs inferred from an example
        m = P.export_factory("sample_models", path=self.path("f2.mpk"),
                             example_inputs=(torch.randn(1, 16),), max_batch_size=4)
        self.assertEqual(m["entry_point"], {"kind": "factory", "module": "sample_models", "function": "build"})
        self.assertEqual(m["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [4]}])
        with self.assertRaisesRegex(ValueError, r"^weights:"):
            P.export_factory("sample_models", "build", {"fc.weight": torch.zeros(4, 16)}, self.path("bad.mpk"),
                             inputs=[("X", "FP32", [16])], outputs=[("Y", "FP32", [4])])

    def test_example_inputs_for(self):
        args = P.example_inputs_for([("A", "FP16", [2, -1]), ("B", "INT64", [3]), ("T", "BYTES", [2])],
                                    max_batch_size=4, batch_size=2)
        self.assertEqual(args[0].dtype, torch.float16)
        self.assertEqual(list(args[0].shape), [2, 2, 1])
        self.assertEqual(list(args[1].shape), [2, 3])
        self.assertEqual(args[2], [[b"example", b"example"], [b"example", b"example"]])


def open_text(path, entry):
    with zipfile.ZipFile(path) as zf:
        return zf.read(entry).decode()


if __name__ == "__main__":
    unittest.main()
