"""Issue 28 item 1, what validates, loads: `manypy-package create` (and
export) ends by loading the archive in a fresh server Python the way the
server does (load_check.py), `--no-load-check` skips that, and `validate
--load` runs it on an existing archive. Also the Python reading of the
archive's frames in a traceback (archive_traceback.py, as the server's)."""
import os
import shutil
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MANYPY_PYTHON = os.path.join(REPO, "package_format", "python")
sys.path.insert(0, MANYPY_PYTHON)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import torch  # noqa: E402

import manypy.package as P  # noqa: E402
from manypy import archive_traceback, load_check  # noqa: E402
from manypy.load_check import LoadCheckError  # noqa: E402
from test_cli import run_cli  # noqa: E402

# Works when exported (in the exporting process the global was set by
# configure()), but the archive re-runs the module's source, where it is 1.0:
# the loaded model answers differently, which only comparing outputs shows.
GLOBAL_STATE = textwrap.dedent('''\
    import torch

    SCALE = 1.0


    def configure(scale):
        global SCALE
        SCALE = scale


    class Net(torch.nn.Module):
        def forward(self, x):
            return x * SCALE


    def build():
        configure(3.0)
        return Net().eval()
    ''')

# Loads only where its data file sits next to it: the archive has no such folder.
READS_BESIDE = textwrap.dedent('''\
    import os
    import torch

    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale.txt")) as f:
        SCALE = float(f.read())


    class Net(torch.nn.Module):
        def forward(self, x):
            return x * SCALE


    def build():
        return Net().eval()
    ''')

GOOD = textwrap.dedent('''\
    import torch


    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return torch.sigmoid(self.fc(x))


    def build():
        torch.manual_seed(1)
        return Net().eval()
    ''')


class LoadCheckCliTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="manypy-load-check-test-")
        for name, source in (("good_net", GOOD), ("global_state", GLOBAL_STATE),
                             ("reads_beside", READS_BESIDE)):
            with open(os.path.join(cls.tmp, name + ".py"), "w") as f:
                f.write(source)
        with open(os.path.join(cls.tmp, "scale.txt"), "w") as f:
            f.write("2.5\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def create(self, module, out, *extra):
        return run_cli(["create", "--model-file", os.path.join(self.tmp, module + ".py"),
                        "--factory", f"{module}:build", "--input", "X:FP32:4",
                        "--max-batch-size", "4", "-o", out] + list(extra))

    def test_create_loads_the_archive_as_the_server_does_and_says_so(self):
        out = os.path.join(self.tmp, "good.mpk")
        proc = self.create("good_net", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("load check: loads in a fresh /usr/bin/python3 as the server loads it, "
                      "warm-up ran, the example's outputs match the eager model's", proc.stdout)
        proc = run_cli(["validate", "--python-only", "--load", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("loads (the server's loader in a fresh /usr/bin/python3, warm-up included)",
                      proc.stdout)

    def test_outputs_that_differ_from_eager_are_refused_and_nothing_is_written(self):
        out = os.path.join(self.tmp, "global_state.mpk")
        proc = self.create("global_state", out)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("loads, but the loaded model's outputs differ from the eager model's: "
                      "output 'OUTPUT__0' of example 0: values differ", proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_load_failure_names_the_stage_and_the_archive_line(self):
        out = os.path.join(self.tmp, "reads_beside.mpk")
        proc = self.create("reads_beside", out)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn(f"load check: {out} fails in the server's loader (loading): "
                      f"FileNotFoundError", proc.stderr)
        self.assertIn('at reads_beside.py:4 in <module>: with open(os.path.join(', proc.stderr)
        self.assertIn("finds files through __file__ (reads_beside.py:4)", proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_no_load_check_writes_it_and_validate_load_refuses_it_later(self):
        out = os.path.join(self.tmp, "unchecked.mpk")
        proc = self.create("reads_beside", out, "--no-load-check")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("load check: skipped (--no-load-check)", proc.stdout)
        self.assertTrue(os.path.exists(out))
        proc = run_cli(["validate", "--python-only", "--load", out])
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("does not load: load check: ", proc.stdout)
        self.assertIn("at reads_beside.py:4 in <module>", proc.stdout)
        # Without --load, validate checks the layout only, as before.
        proc = run_cli(["validate", "--python-only", out])
        self.assertEqual(proc.returncode, 0, proc.stdout)

    def test_validate_load_checks_outputs_against_the_signature(self):
        # The manifest declares 3 values per row; the model returns 2.
        out = os.path.join(self.tmp, "wrong_signature.mpk")
        sys.path.insert(0, self.tmp)
        try:
            module = P.import_model_module(os.path.join(self.tmp, "good_net.py"))
            P.export(module.build(), out, inputs=[("X", "FP32", [4])],
                     outputs=[("Y", "FP32", [3])], max_batch_size=4, modules=[module])
        finally:
            sys.path.remove(self.tmp)
        proc = run_cli(["validate", "--python-only", "--load", out])
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("loads, but its outputs break the manifest: output 'Y' of example 0: "
                      "outputs[0].shape: declared [3], the loaded model returned [2]", proc.stdout)

    def test_validate_load_of_a_torchscript_archive_loads_it_as_libtorch_does(self):
        out = os.path.join(self.tmp, "good_ts.mpk")
        proc = self.create("good_net", out, "--torchscript")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        proc = run_cli(["validate", "--python-only", "--load", out])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("loads (torch.jit.load, as the server's libtorch)", proc.stdout)

    def test_validate_load_runs_after_the_cpp_checker(self):
        checker = os.environ.get("MANYPY_ARCHIVE_CHECK") or os.path.join(
            REPO, "build", "bin", "manypy-archive-check")
        if not os.access(checker, os.X_OK):
            self.skipTest(f"{checker} is not built")
        out = os.path.join(self.tmp, "checked.mpk")
        self.assertEqual(self.create("good_net", out, "--no-load-check").returncode, 0)
        proc = run_cli(["validate", "--load", out], env=dict(os.environ, MANYPY_ARCHIVE_CHECK=checker))
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("loads (the server's loader", proc.stdout)


# Dies as soon as it is imported from an archive (its name is then mangled),
# before the fresh process can answer.
DIES_IN_ARCHIVE = textwrap.dedent('''\
    import os
    import signal
    import torch

    if __name__.startswith("<torch_package_"):
        os.kill(os.getpid(), signal.SIGKILL)


    class Net(torch.nn.Module):
        def forward(self, x):
            return x + 1
    ''')


class LoadCheckApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="manypy-load-check-api-")
        for name, source in (("global_state_api", GLOBAL_STATE), ("dies_in_archive", DIES_IN_ARCHIVE)):
            with open(os.path.join(cls.tmp, name + ".py"), "w") as f:
                f.write(source)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def module(self, name):
        return P.import_model_module(os.path.join(self.tmp, name + ".py"))

    def test_export_checks_by_default_and_load_check_false_skips(self):
        module = self.module("global_state_api")
        x = torch.ones(2, 4)
        out = os.path.join(self.tmp, "state.mpk")
        with self.assertRaisesRegex(LoadCheckError, r"outputs differ from the eager model's: "
                                    r"output 'OUTPUT__0' of example 0: values differ \(largest "
                                    r"difference 2;"):
            P.export(module.build(), out, example_inputs=(x,), max_batch_size=4)
        self.assertFalse(os.path.exists(out))
        P.export(module.build(), out, example_inputs=(x,), max_batch_size=4, load_check=False)
        # What the server would answer: the module's own SCALE, 1.0, not the 3.0 set here.
        loaded = load_check.check_loads(out, [(x,)])
        self.assertTrue(torch.equal(loaded[0][0], x))
        model, _ = P.load_model(out)  # the same loader in this process
        self.assertTrue(torch.equal(model(x), x))

    def test_a_model_that_kills_the_fresh_process_is_reported(self):
        module = self.module("dies_in_archive")
        out = os.path.join(self.tmp, "dies.mpk")
        with self.assertRaisesRegex(LoadCheckError, r"ended with status -9 before it answered"):
            P.export(module.Net(), out, inputs=[("X", "FP32", [2])], outputs=[("Y", "FP32", [2])])
        self.assertFalse(os.path.exists(out))


class ArchiveTracebackTest(unittest.TestCase):
    TRACEBACK = textwrap.dedent('''\
        Traceback (most recent call last):
          File "/usr/lib/python3/dist-packages/torch/nn/modules/module.py", line 1190, in _call_impl
            return forward_call(*input, **kwargs)
          File "<torch_package_0>.fault_models.py", line 68, in forward
            return fault_helpers.check_input(x) * 2
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
          File "<torch_package_0>.pkg.fault_helpers.py", line 7, in check_input
            _require_positive(x)
          File "<torch_package_0>.pkg.fault_helpers.py", line 12, in _require_positive
            raise ValueError(f"negative input")
        ValueError: negative input
        ''')

    def test_frames_innermost_first_as_files_inside_the_archive(self):
        frames = archive_traceback.archive_frames(self.TRACEBACK)
        self.assertEqual(frames, [
            ("pkg/fault_helpers.py", 12, "_require_positive", 'raise ValueError(f"negative input")'),
            ("pkg/fault_helpers.py", 7, "check_input", "_require_positive(x)"),
            ("fault_models.py", 68, "forward", "return fault_helpers.check_input(x) * 2"),
        ])

    def test_describe_as_the_server_does(self):
        self.assertEqual(
            archive_traceback.describe(self.TRACEBACK),
            ' at pkg/fault_helpers.py:12 in _require_positive: raise ValueError(f"negative input")'
            ' (called from pkg/fault_helpers.py:7 in check_input; fault_models.py:68 in forward)')
        self.assertEqual(archive_traceback.describe("Traceback:\n  File \"/x.py\", line 1, in f\n"), "")
        self.assertEqual(len(archive_traceback.describe(self.TRACEBACK, max_chars=40)), 40)


if __name__ == "__main__":
    unittest.main()
