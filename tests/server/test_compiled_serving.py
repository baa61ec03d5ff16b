"""torch.compile'd models served by manypy-server with 2 interpreters
(PyTorch 2.x): packaged with the factory entry point, compiled by the warm-up
(never by a request of any batch size), served with eager's results, a
recompilation while serving counted on /metrics per model and logged once
with its reason, Inductor's cache shared and kept in --compile-cache-dir;
and a server that lacks the compiler refuses the model at load naming it.
On PyTorch 1.x the packager refuses such a model, naming the version.

    ctest -R compiled_serving_test
"""
import os
import sys
import tempfile
import textwrap
import threading
import unittest
import urllib.request

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "package_format", "python"),
                os.path.join(REPO, "clients", "python"),
                os.path.join(REPO, "tests", "test_util")]
from manypy_server import ManypyServer  # noqa: E402

import manypy.package  # noqa: E402
from manypy.client import InferenceClient  # noqa: E402


# A model whose last input dimension is variable (-1): its warm-up compiles
# length 1 (the signature's), batch 1 and a dynamic batch; a request with
# another length makes Dynamo compile again.
MODEL_SOURCE = textwrap.dedent('''
    import torch

    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.tensor([1.5, -2.0, 0.5]))

        def forward(self, x):
            return torch.relu(x.sum(dim=-1, keepdim=True) * self.weight) + 1

    def build():
        return torch.compile(Scale().eval())
''')


def reference(x):
    weight = np.array([1.5, -2.0, 0.5], dtype=np.float32)
    return np.maximum(x.sum(axis=-1, keepdims=True) * weight, 0) + 1


class Server(ManypyServer):
    def __init__(self, repository, cache, env=None):
        super().__init__(["--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0",
                          "--metrics-address=127.0.0.1", "--metrics-port=0", "--interpreters=2",
                          f"--compile-cache-dir={cache}", f"--model-repository={repository}"],
                         env=env)

    def metric(self, name, model):
        text = urllib.request.urlopen(f"http://{self.metrics}/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            if line.startswith(name + "{") and f'model="{model}"' in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0


@unittest.skipIf(not hasattr(torch, "compile"), f"torch.compile is PyTorch 2.x's ({torch.__version__})")
class CompiledServingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.repository = os.path.join(cls.tmp.name, "repository")
        cls.cache = os.path.join(cls.tmp.name, "inductor")
        os.makedirs(cls.repository)
        module = os.path.join(cls.tmp.name, "compiled_scale.py")
        with open(module, "w") as f:
            f.write(MODEL_SOURCE)
        manypy.package.export_factory(
            module, "build", path=os.path.join(cls.repository, "compiled_scale.mpk"),
            example_inputs=(torch.ones(2, 1),), more_example_inputs=[(torch.ones(2, 3),)],
            max_batch_size=8, batching={"dynamic": True, "max_queue_delay_microseconds": 20000})

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_compiled_at_load_served_at_every_batch_size_recompiles_counted(self):
        server = Server(self.repository, self.cache)
        try:
            client = InferenceClient(server.grpc)
            self.assertTrue(client.is_model_ready("compiled_scale"))
            # Batches of 1 to 8 rows (dynamic batching joins concurrent requests).
            rng = np.random.default_rng(0)
            requests = [rng.standard_normal((rows, 1)).astype(np.float32)
                        for rows in (1, 2, 3, 1, 4, 2, 1, 1)]
            answers = [None] * len(requests)

            def send(i):
                answers[i] = client.infer("compiled_scale", {"INPUT__0": requests[i]}) \
                    .as_numpy("OUTPUT__0")

            threads = [threading.Thread(target=send, args=(i,)) for i in range(len(requests))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            for x, y in zip(requests, answers):
                np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
            for rows in range(1, 9):
                x = rng.standard_normal((rows, 1)).astype(np.float32)
                y = client.infer("compiled_scale", {"INPUT__0": x}).as_numpy("OUTPUT__0")
                np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
            # The warm-up compiled batch 1 and a dynamic batch: no request recompiled.
            self.assertEqual(server.metric("manypy_model_recompiles_total", "compiled_scale"), 0)

            # A length the warm-up never saw: compiled again, on the request.
            for length in (7, 7):
                x = rng.standard_normal((2, length)).astype(np.float32)
                y = client.infer("compiled_scale", {"INPUT__0": x}).as_numpy("OUTPUT__0")
                np.testing.assert_allclose(y, reference(x), rtol=1e-5, atol=1e-5)
            recompiles = server.metric("manypy_model_recompiles_total", "compiled_scale")
            self.assertGreaterEqual(recompiles, 1)
            self.assertLessEqual(recompiles, 2)  # once per interpreter at most
            client.close()
        finally:
            server.stop()
        log = server.stderr()
        lines = [line for line in log.splitlines() if "was compiled again while serving" in line]
        self.assertEqual(len(lines), 1, log[-3000:])
        self.assertIn("compiled_scale", lines[0])
        self.assertIn("forward", lines[0])  # the frame that recompiled, with its guard failure
        # Inductor's cache is the one the operator named, and it is filled:
        # FX graphs, AOTAutograd's graphs (the pool turns that cache on), and
        # the key of torch's sources that the runtime keeps so that a restart
        # does not hash torch's files again.
        self.assertTrue(os.path.isdir(os.path.join(self.cache, "fxgraph")), os.listdir(self.cache))
        self.assertTrue(os.listdir(os.path.join(self.cache, "aotautograd")), os.listdir(self.cache))
        self.assertEqual(len(os.listdir(os.path.join(self.cache, "manypy_torch_key"))), 1)

    def test_a_server_without_the_compiler_refuses_the_model_naming_it(self):
        server = Server(self.repository, self.cache, env={"CXX": "/nonexistent/manypy-test-c++"})
        try:
            client = InferenceClient(server.grpc)
            self.assertFalse(client.is_model_ready("compiled_scale"))
            index = {m["name"]: m for m in client.repository_index()}
            reason = index["compiled_scale"].get("reason", "")
            self.assertIn("a C++ compiler (/nonexistent/manypy-test-c++", reason)
            self.assertIn("torch.compile", reason)
            client.close()
        finally:
            server.stop()


# A factory that makes its own weights from a seed, pausing between its two
# layers (the GIL released): two interpreters building it at once would
# interleave their draws from libtorch's one default generator. Its answer
# carries the index of the interpreter that ran it.
SEEDED_SOURCE = textwrap.dedent('''
    import sys
    import time
    import torch

    class Seeded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.first = torch.nn.Linear(16, 16)
            time.sleep(0.3)
            self.second = torch.nn.Linear(16, 16)

        def forward(self, x):
            index = getattr(sys.modules.get("_manypy"), "index", -1)  # -1: packaging, outside
            here = torch.full((x.shape[0], 1), float(index))
            return torch.cat([self.second(self.first(x)), here], dim=1)

    def build():
        torch.manual_seed(7)
        return Seeded().eval()
''')


class SeededFactoryTest(unittest.TestCase):
    """The weights a factory draws from torch.manual_seed are the same in
    every interpreter: the runtime builds such a factory (one without a
    weights resource) in one interpreter at a time, since libtorch's default
    generator is one per process. A compiled model with freezing folds them
    into its kernels, so different weights also meant a second compile and a
    missed cache at the next start (docs/debian13.md, trap 24). Both
    releases."""

    def test_every_interpreter_builds_the_same_weights(self):
        with tempfile.TemporaryDirectory() as tmp:
            repository = os.path.join(tmp, "repository")
            os.makedirs(repository)
            module = os.path.join(tmp, "seeded_factory.py")
            with open(module, "w") as f:
                f.write(SEEDED_SOURCE)
            manypy.package.export_factory(module, "build",
                                          path=os.path.join(repository, "seeded.mpk"),
                                          example_inputs=(torch.ones(1, 16),), max_batch_size=1)
            server = Server(repository, os.path.join(tmp, "inductor"))
            try:
                client = InferenceClient(server.grpc)
                x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
                answers = {}
                lock = threading.Lock()

                def send():
                    for _ in range(10):
                        y = client.infer("seeded", {"INPUT__0": x}).as_numpy("OUTPUT__0")
                        with lock:
                            answers.setdefault(int(y[0, -1]), []).append(y[0, :-1])

                threads = [threading.Thread(target=send) for _ in range(4)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                client.close()
            finally:
                server.stop()
        self.assertEqual(sorted(answers), [0, 1], "both interpreters answered")
        for y in answers[1]:
            np.testing.assert_array_equal(y, answers[0][0])


@unittest.skipIf(hasattr(torch, "compile"), "PyTorch 2.x packages compiled models")
class CompiledPackagingOnTorch1Test(unittest.TestCase):
    def test_the_packager_refuses_naming_the_version(self):
        with tempfile.TemporaryDirectory() as tmp:
            module = os.path.join(tmp, "compiled_scale.py")
            with open(module, "w") as f:
                f.write(MODEL_SOURCE)
            with self.assertRaises(ValueError) as refused:
                manypy.package.export_factory(module, "build", path=os.path.join(tmp, "m.mpk"),
                                              example_inputs=(torch.ones(2, 1),), max_batch_size=8)
            self.assertIn("torch.compile", str(refused.exception))
            self.assertIn(torch.__version__, str(refused.exception))
            self.assertIn("PyTorch 2.x", str(refused.exception))


if __name__ == "__main__":
    unittest.main()
