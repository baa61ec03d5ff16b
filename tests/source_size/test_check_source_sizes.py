"""check_source_sizes.py on made-up trees: it names each production source
over its limit, holds server/main.cc to 80 lines, and leaves alone tests,
data files and caches."""
import contextlib
import io
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_source_sizes as C  # noqa: E402


class CheckSourceSizesTest(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.root)
        self.write("server/main.cc", 80)

    def write(self, relative, lines):
        path = os.path.join(self.root, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("x\n" * lines)

    def run_check(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = C.main(["check_source_sizes.py", self.root])
        return status, out.getvalue()

    def test_files_at_their_limits_pass(self):
        self.write("server/lifecycle/model.cc", 450)
        self.write("package_format/python/manypy/manifest.py", 450)
        self.assertEqual(self.run_check()[0], 0)

    def test_names_every_production_source_over_450_lines(self):
        self.write("server/lifecycle/model.cc", 451)
        self.write("interpreters/shim/boot.py", 600)
        self.write("tools/run.sh", 500)
        self.write("common/status.h", 300)
        status, out = self.run_check()
        self.assertEqual(status, 1)
        self.assertIn("server/lifecycle/model.cc: 451 lines, over the limit of 450", out)
        self.assertIn("interpreters/shim/boot.py: 600 lines", out)
        self.assertIn("tools/run.sh: 500 lines", out)
        self.assertNotIn("common/status.h", out)

    def test_main_cc_is_held_to_80_lines(self):
        self.write("server/main.cc", 81)
        status, out = self.run_check()
        self.assertEqual(status, 1)
        self.assertIn("server/main.cc: 81 lines, over the limit of 80", out)

    def test_tests_data_and_caches_are_not_held_to_it(self):
        self.write("tests/server/long_e2e_test.cc", 900)
        self.write("fuzz/manifest/seeds/big.json", 900)
        self.write("clients/python/__pycache__/x.py", 900)
        self.write("models/big_model.py", 900)
        self.assertEqual(self.run_check()[0], 0)

    def test_counts_a_last_line_without_a_newline(self):
        path = os.path.join(self.root, "common/a.cc")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("x\n" * 450 + "y")
        status, out = self.run_check()
        self.assertEqual(status, 1)
        self.assertIn("common/a.cc: 451 lines", out)

    def test_refuses_a_folder_that_is_not_the_repository(self):
        os.remove(os.path.join(self.root, "server/main.cc"))
        self.assertEqual(self.run_check()[0], 2)


if __name__ == "__main__":
    unittest.main()
