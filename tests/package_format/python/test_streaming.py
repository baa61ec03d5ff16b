"""manypy.package: streaming models (a generator's yields are responses)."""
import os
import shutil
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "package_format", "python"))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import torch  # noqa: E402

import manypy.manifest as M  # noqa: E402
import manypy.package as P  # noqa: E402
import streaming_samples as S  # noqa: E402

IO = {"inputs": [("X", "FP32", [-1])], "outputs": [("PIECE", "FP32", [-1])]}


class StreamingExportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="manypy-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def test_a_generator_function_streams_without_examples(self):
        manifest = P.export(S.Pieces(), self.path("p.mpk"), **IO)
        self.assertIs(manifest["streaming"], True)
        self.assertEqual(P.read_manifest(self.path("p.mpk"))["streaming"], True)

    def test_the_examples_yields_give_the_signature(self):
        manifest = P.export(S.Pieces(), self.path("p.mpk"), example_inputs=(torch.ones(3),))
        self.assertIs(manifest["streaming"], True)
        # Three responses of 1, 2 and 3 elements: a variable dimension.
        self.assertEqual(manifest["outputs"], [{"name": "PIECE", "datatype": "FP32", "shape": [-1]}])

    def test_a_returned_iterator_streams(self):
        manifest = P.export(S.ReturnsIterator(), self.path("r.mpk"), example_inputs=(torch.ones(2),))
        self.assertIs(manifest["streaming"], True)
        self.assertEqual(manifest["outputs"][0]["shape"], [2])

    def test_an_ordinary_model_does_not_stream_and_the_field_is_left_out(self):
        manifest = P.export(torch.nn.ReLU(), self.path("o.mpk"), example_inputs=(torch.ones(2),))
        self.assertNotIn("streaming", manifest)

    def test_a_stream_that_yields_nothing_for_its_example_is_refused(self):
        with self.assertRaisesRegex(ValueError, "yielded nothing for example_inputs"):
            P.export(S.YieldsNothing(), self.path("n.mpk"), example_inputs=(torch.ones(2),))

    def test_streaming_cannot_batch_dynamically(self):
        with self.assertRaisesRegex(ValueError, "cannot batch dynamically"):
            P.export(S.Pieces(), self.path("b.mpk"), inputs=[("X", "FP32", [-1])],
                     outputs=[("PIECE", "FP32", [-1])], max_batch_size=4, batching=True)

    def test_the_manifest_rules(self):
        base = M.build_manifest("m", 1, {"kind": "pickle"}, [("X", "FP32", [1])],
                                [("Y", "FP32", [1])], streaming=True)
        self.assertIs(base["streaming"], True)
        with self.assertRaisesRegex(ValueError, "streaming.*must be true or false"):
            M.validate_manifest(dict(base, streaming="yes"))
        with self.assertRaisesRegex(ValueError, "only a Python model"):
            M.validate_manifest(dict(base, platform="torchscript",
                                     entry_point={"kind": "torchscript"}))


if __name__ == "__main__":
    unittest.main()
