"""Archives across PyTorch releases, and the modern example model, against the
real manypy-server (Debian 12: PyTorch 1.13; Debian 13: PyTorch 2.6).

- torch_versions/two_io_torch1_13.mpk was packaged on Debian 12; it loads and
  serves on both releases.
- torch_versions/two_io_torch2_6.mpk records PyTorch 2.6: it serves on 2.6
  and is refused on 1.13 with a reason naming both versions.
- tiny_decoder (models/tiny_decoder.py: RMSNorm, rotary embeddings, SDPA)
  is in the repository where torch >= 2.4 and serves the same logits as the
  model run here; on 1.13 the test is skipped, the reason printed.
"""
import os
import sys
import unittest

import numpy as np
import torch

from test_client import REPO, REPOSITORY, ServerProcess
from manypy.client import InferenceClient, InferenceServerError

TORCH = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
TWO_IO = {"INPUT_A": np.array([1, 2, 3, 4], np.float32),
          "INPUT_B": np.array([10, 20, 30, 40], np.int64)}


class TorchVersionsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(repository=os.path.join(REPOSITORY, "torch_versions"), load=())
        cls.client = InferenceClient(cls.server.address, timeout=60)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop_expecting_clean_exit()

    def check_serves(self, name):
        self.client.load_model(name)
        try:
            out = self.client.infer(name, TWO_IO)
            self.assertEqual(out.as_numpy("SUM").tolist(), [11.0, 22.0, 33.0, 44.0])
            self.assertEqual(out.as_numpy("PRODUCT").tolist(), [10.0, 40.0, 90.0, 160.0])
        finally:
            self.client.unload_model(name)

    def test_an_archive_packaged_under_1_13_serves(self):
        self.check_serves("two_io_torch1_13")

    def test_an_archive_packaged_under_2_6_serves_on_2_6_and_is_refused_on_1_13(self):
        if TORCH >= (2, 6):
            self.check_serves("two_io_torch2_6")
            return
        with self.assertRaises(InferenceServerError) as caught:
            self.client.load_model("two_io_torch2_6")
        message = caught.exception.message
        self.assertIn("packaged with PyTorch 2.6.0+debian (Python 3.13.5", message)
        self.assertIn(f"this server runs PyTorch {torch.__version__}", message)
        self.assertNotIn("Traceback", message)
        self.assertFalse(self.client.is_model_ready("two_io_torch2_6"))


class ModernModelTest(unittest.TestCase):
    def test_tiny_decoder_serves_the_logits_torch_computes(self):
        sys.path.insert(0, os.path.join(REPO, "models"))
        import tiny_decoder
        why = tiny_decoder.supported()
        archive = os.path.join(REPOSITORY, "tiny_decoder.mpk")
        if why:
            self.assertFalse(os.path.exists(archive), "make_repository.py should have skipped it")
            print(f"\ntest_tiny_decoder_serves_the_logits_torch_computes skipped: {why}", flush=True)
            self.skipTest(why)
        self.assertTrue(os.path.exists(archive), archive)
        server = ServerProcess(load=("tiny_decoder",))
        try:
            with InferenceClient(server.address, timeout=60) as client:
                ids = (np.arange(24, dtype=np.int64).reshape(2, 12) * 7) % tiny_decoder.VOCAB
                logits = client.infer("tiny_decoder", {"INPUT_IDS": ids}).as_numpy("LOGITS")
            with torch.inference_mode():
                expected = tiny_decoder.build()(torch.from_numpy(ids)).numpy()
            self.assertEqual(logits.shape, (2, 12, tiny_decoder.VOCAB))
            np.testing.assert_allclose(logits, expected, rtol=1e-4, atol=1e-4)
        finally:
            server.stop_expecting_clean_exit()


if __name__ == "__main__":
    unittest.main()
