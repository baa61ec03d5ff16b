"""Signatures of real models' results: outputs that are None for the
examples are left out of the signature (export warns) and are a clear error
when the server finds None in a declared output; several examples or
dynamic_dims make dimensions variable (-1); a list holding one dict
(torchvision's detectors) is keyed by its dict. The server's side is
the package manypy_model_runtime, imported here by the name the server gives it."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MANYPY_PYTHON = os.path.join(REPO, "package_format", "python")
sys.path.insert(0, MANYPY_PYTHON)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import torch  # noqa: E402

import manypy.package as P  # noqa: E402
import manypy_model_runtime as runtime  # noqa: E402
import sample_models  # noqa: E402


def serve(model, manifest, *args):
    """The server's call path (model_runtime.infer) for a manifest."""
    return runtime.infer(model, manifest.get("method"), [o["name"] for o in manifest["outputs"]],
                         "cpu", manifest.get("max_batch_size", 0) > 0, list(args))


class TempDirTest(unittest.TestCase):
    """A temporary folder per test for the archives it writes."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="manypy-sig-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)


class NoneOutputsTest(TempDirTest):
    def export_warned(self, model, name, **kwargs):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            manifest = P.export(model, self.path(name), **kwargs)
        return manifest, [str(w.message) for w in caught]

    def test_none_tuple_element_is_left_out_with_a_warning_and_served_by_index(self):
        model = sample_models.NoneSecond()
        manifest, warned = self.export_warned(model, "none.mpk", example_inputs=(torch.ones(2, 3),),
                                              max_batch_size=4)
        self.assertEqual(manifest["outputs"], [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [3]}])
        self.assertTrue(any("['OUTPUT__1'] are None" in w and "left out" in w for w in warned), warned)
        loaded, _ = P.load_model(self.path("none.mpk"))
        x = torch.randn(3, 3)
        out = serve(loaded, manifest, x)
        self.assertEqual(len(out), 1)
        self.assertTrue(torch.equal(out[0], x + 1))

    def test_none_dict_value_is_left_out(self):
        manifest, warned = self.export_warned(sample_models.NoneInDict(), "d.mpk",
                                              example_inputs=(torch.ones(4),))
        self.assertEqual([o["name"] for o in manifest["outputs"]], ["Y"])
        self.assertTrue(any("['AUX']" in w for w in warned), warned)
        loaded, _ = P.load_model(self.path("d.mpk"))
        self.assertTrue(torch.equal(serve(loaded, manifest, torch.ones(4))[0], torch.full((4,), 3.0)))

    def test_declared_outputs_with_none(self):
        model = sample_models.NoneSecond()
        x = (torch.ones(2, 3),)
        # A declared output that is None for the example is refused, naming it.
        with self.assertRaisesRegex(ValueError, r"^outputs\[1\]: 'B' \(element 1 of the result\) is None"):
            P.export(model, self.path("x.mpk"), example_inputs=x, max_batch_size=4,
                     outputs=[("A", "FP32", [3]), ("B", "FP32", [3])])
        # One declared output for a 2-element result needs its position in its name.
        with self.assertRaisesRegex(ValueError, r"^outputs: 1 declared, the model returned 2; "
                                                r"elements \[1\] are None: name the others NAME__<index>"):
            P.export(model, self.path("x.mpk"), example_inputs=x, max_batch_size=4,
                     outputs=[("FEATURES", "FP32", [3])])
        manifest, warned = self.export_warned(model, "ok.mpk", example_inputs=x, max_batch_size=4,
                                              outputs=[("FEATURES__0", "FP32", [3])])
        self.assertTrue(any("element 1" in w for w in warned), warned)
        loaded, _ = P.load_model(self.path("ok.mpk"))
        self.assertTrue(torch.equal(serve(loaded, manifest, torch.zeros(1, 3))[0], torch.ones(1, 3)))
        with self.assertRaisesRegex(ValueError, r"^outputs\[0\]: 'AUX' is None"):
            P.export(sample_models.NoneInDict(), self.path("x.mpk"), example_inputs=(torch.ones(4),),
                     outputs=[("AUX", "FP32", [4])])
        with self.assertRaisesRegex(ValueError, r"^outputs: the model returned None"):
            P.export(sample_models.ReturnsNone(), self.path("x.mpk"), example_inputs=(torch.ones(1),))

    def test_serving_none_in_a_declared_output_is_an_error_naming_it(self):
        names = ["OUTPUT__0", "OUTPUT__2"]
        t = torch.ones(2)
        self.assertEqual(runtime._as_output_list((t, None, t * 2), names)[1].tolist(), [2.0, 2.0])
        with self.assertRaisesRegex(runtime.ModelOutputError, r"^output 'OUTPUT__2' is None"):
            runtime._as_output_list((t, t, None), names)
        with self.assertRaisesRegex(runtime.ModelOutputError, r"^output 'Y' is None"):
            runtime._as_output_list({"Y": None}, ["Y"])
        with self.assertRaisesRegex(runtime.ModelOutputError, r"^output 'X' is None"):
            runtime._as_output_list(None, ["X"])
        with self.assertRaisesRegex(runtime.ModelOutputError, r"returned 2 values, the manifest declares 1"):
            runtime._as_output_list((t, t), ["FEATURES"])
        # A single BYTES output may be a plain list of bytes.
        self.assertEqual(runtime._as_output_list([b"a", b"b"], ["TEXT"]), [[b"a", b"b"]])


class VariableDimsTest(TempDirTest):
    def test_differing_dims_over_examples_become_variable(self):
        model = sample_models.Detections()
        m = P.export(model, self.path("det.mpk"), inputs=[("IMAGE", "FP32", [1, 3, -1, -1])],
                     example_inputs=(torch.rand(1, 3, 8, 8),),
                     more_example_inputs=[(torch.rand(1, 3, 4, 6),)])
        # A list holding one dict: the dict's keys name the outputs.
        self.assertEqual(m["outputs"], [{"name": "boxes", "datatype": "FP32", "shape": [-1, 4]},
                                        {"name": "scores", "datatype": "FP32", "shape": [-1]}])
        # Inferred inputs too; one example alone gives fixed dimensions.
        m = P.export(model, self.path("det2.mpk"), example_inputs=(torch.rand(1, 3, 8, 8),),
                     more_example_inputs=[(torch.rand(1, 3, 8, 6),)])
        self.assertEqual(m["inputs"], [{"name": "INPUT__0", "datatype": "FP32", "shape": [1, 3, 8, -1]}])
        m = P.export(model, self.path("det3.mpk"), example_inputs=(torch.rand(1, 3, 8, 8),))
        self.assertEqual(m["outputs"][0]["shape"], [16, 4])  # the trap: one example, fixed
        # A dimension of size 0 (no detections) is variable.
        m = P.export(model, self.path("det4.mpk"), example_inputs=(torch.rand(1, 3, 1, 1),))
        self.assertEqual(m["outputs"][0]["shape"], [-1, 4])
        # The server reads the list's one dict, whatever the number of boxes.
        loaded, _ = P.load_model(self.path("det.mpk"))
        out = serve(loaded, m, torch.rand(1, 3, 10, 10))
        self.assertEqual([list(o.shape) for o in out], [[25, 4], [25]])
        with self.assertRaisesRegex(runtime.ModelOutputError, r"list of 2 dicts"):
            serve(loaded, m, torch.rand(2, 3, 10, 10))

    def test_dynamic_dims(self):
        model = sample_models.Detections()
        m = P.export(model, self.path("d.mpk"), example_inputs=(torch.rand(1, 3, 8, 8),),
                     dynamic_dims={"boxes": [0], "scores": 0, "INPUT__0": [2, 3]})
        self.assertEqual(m["inputs"][0]["shape"], [1, 3, -1, -1])
        self.assertEqual([o["shape"] for o in m["outputs"]], [[-1, 4], [-1]])
        with self.assertRaisesRegex(ValueError, r"^dynamic_dims: no input or output named 'labels'"):
            P.export(model, self.path("x.mpk"), example_inputs=(torch.rand(1, 3, 8, 8),),
                     dynamic_dims={"labels": [0]})
        with self.assertRaisesRegex(ValueError, r"^dynamic_dims\['boxes'\]: dimension 2 is not in 0..1"):
            P.export(model, self.path("x.mpk"), example_inputs=(torch.rand(1, 3, 8, 8),),
                     dynamic_dims={"boxes": [2]})
        # Declared signatures take them too.
        m = P.export(sample_models.build(), self.path("t.mpk"), inputs=[("X", "FP32", [16])],
                     outputs=[("Y", "FP32", [4])], max_batch_size=2, dynamic_dims={"Y": [0]})
        self.assertEqual(m["outputs"][0]["shape"], [-1])

    def test_examples_must_agree_on_rank_datatype_and_outputs(self):
        model = sample_models.MultiOut()
        with self.assertRaisesRegex(ValueError, r"^inputs\[0\]: the examples give different ranks"):
            P.export(model, self.path("x.mpk"), example_inputs=(torch.ones(2, 3), torch.ones(2, 2).long()),
                     more_example_inputs=[(torch.ones(2, 3, 1), torch.ones(2, 2).long())])
        with self.assertRaisesRegex(ValueError, r"^inputs\[1\]: the examples give datatypes"):
            P.export(model, self.path("x.mpk"), example_inputs=(torch.ones(2, 3), torch.ones(2, 2).long()),
                     more_example_inputs=[(torch.ones(2, 3), torch.ones(2, 2).int())])
        # Batch sizes may differ between examples; the batch dimension stays out of the shapes.
        m = P.export(model, self.path("ok.mpk"), max_batch_size=4,
                     example_inputs=(torch.ones(2, 3), torch.ones(2, 2).long()),
                     more_example_inputs=[(torch.ones(3, 3), torch.ones(3, 2).long())])
        self.assertEqual([i["shape"] for i in m["inputs"]], [[3], [2]])

    def test_inspect_says_which_dims_are_variable(self):
        P.export(sample_models.Detections(), self.path("det.mpk"), example_inputs=(torch.rand(1, 3, 8, 8),),
                 more_example_inputs=[(torch.rand(1, 3, 4, 6),)])
        env = dict(os.environ, PYTHONPATH=MANYPY_PYTHON)
        proc = subprocess.run(["/usr/bin/python3", "-m", "manypy.cli", "inspect", self.path("det.mpk")],
                              capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("variable dimensions (-1: any size at serving time): "
                      "input INPUT__0 [2, 3]; output boxes [0]; output scores [0]", proc.stdout)


if __name__ == "__main__":
    unittest.main()
