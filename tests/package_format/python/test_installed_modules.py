"""Extern by default: a module installed in the packaging Python (its
site-packages / dist-packages) is extern, the user's own code is interned,
`inspect` lists what the archive expects the server to provide, and the
server's loader (the package manypy_model_runtime) refuses, naming them,
extern modules its Python cannot import."""
import importlib.util
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

import torch  # noqa: E402

import manypy.package as P  # noqa: E402
from manypy.load_check import LoadCheckError  # noqa: E402

LIB = "manypy_fake_installed_lib"  # installed into a temporary site-packages folder
USER = "manypy_user_net_extern"    # the user's own module, in a plain folder

USER_SOURCE = textwrap.dedent(f'''\
    import torch
    import {LIB}
    from {LIB} import ops


    class Net(torch.nn.Module):
        def forward(self, x):
            return ops.double({LIB}.OFFSET + x)
    ''')

# Loads an archive's extern modules the way the server does, in a fresh Python.
CHECK_SCRIPT = textwrap.dedent('''\
    import sys
    sys.path.insert(0, sys.argv[1])
    import manypy_model_runtime as runtime
    from torch.package import PackageImporter
    try:
        runtime.check_extern_modules(PackageImporter(sys.argv[2]), sys.argv[2])
    except runtime.MissingModulesError as e:
        print("MISSING", e)
        sys.exit(3)
    print("OK")
    ''')


def extern_list(path):
    with zipfile.ZipFile(path) as zf:
        top = zf.namelist()[0].split("/", 1)[0]
        return zf.read(f"{top}/.data/extern_modules").decode().split(), \
            [n[len(top) + 1:] for n in zf.namelist()]


class InstalledModulesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="manypy-extern-test-")
        cls.site = os.path.join(cls.tmp, "venv", "lib", "site-packages")
        lib = os.path.join(cls.site, LIB)
        os.makedirs(lib)
        with open(os.path.join(lib, "__init__.py"), "w") as f:
            f.write("OFFSET = 1.0\n")
        with open(os.path.join(lib, "ops.py"), "w") as f:
            f.write("def double(x):\n    return x * 2\n")
        cls.user_dir = os.path.join(cls.tmp, "project")
        os.makedirs(cls.user_dir)
        with open(os.path.join(cls.user_dir, USER + ".py"), "w") as f:
            f.write(USER_SOURCE)
        sys.path[:0] = [cls.site, cls.user_dir]
        cls.module = importlib.import_module(USER)

    @classmethod
    def tearDownClass(cls):
        for folder in (cls.site, cls.user_dir):
            sys.path.remove(folder)
        for name in (USER, LIB, LIB + ".ops"):
            sys.modules.pop(name, None)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def export(self, name, load_check=False, **kwargs):
        # The temporary site-packages is on this process's sys.path only, so the
        # server's Python (and the load check's, which runs it isolated) lacks the
        # library: these tests look at how the archive lists it, without the check.
        path = os.path.join(self.tmp, name)
        P.export(self.module.Net(), path, inputs=[("X", "FP32", [3])],
                 example_inputs=(torch.ones(3),), load_check=load_check, **kwargs)
        return path

    def run_check(self, path, extra_path=None):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (extra_path,) if p)
        return subprocess.run(["/usr/bin/python3", "-c", CHECK_SCRIPT, MANYPY_PYTHON, path],
                              capture_output=True, text=True, timeout=120, env=env)

    def test_installed_modules_lists_site_packages_not_user_code(self):
        names = P.installed_modules()
        self.assertIn(LIB, names)
        self.assertIn("torch", names)  # Debian's dist-packages
        self.assertNotIn(USER, names)
        self.assertNotIn("manypy", names)  # on sys.path, but not installed

    def test_installed_library_is_extern_and_user_code_interned(self):
        path = self.export("net.mpk")
        externs, files = extern_list(path)
        self.assertIn(LIB, externs)
        self.assertIn(f"{LIB}.ops", externs)
        self.assertIn("torch", externs)
        self.assertIn(f"{USER}.py", files)
        self.assertFalse([f for f in files if f.startswith(LIB)], files)

    def test_intern_pattern_takes_an_installed_package_into_the_archive(self):
        path = self.export("interned.mpk", intern=[LIB, f"{LIB}.**", "**"])
        externs, files = extern_list(path)
        self.assertNotIn(LIB, externs)
        self.assertIn(f"{LIB}/__init__.py", files)
        self.assertIn(f"{LIB}/ops.py", files)
        # It loads where the library is not installed: the archive brings it.
        self.assertEqual(self.run_check(path).stdout.strip(), "OK")

    def test_server_loader_refuses_missing_extern_modules_naming_them(self):
        path = self.export("net.mpk")
        proc = self.run_check(path)  # a Python without the temporary site-packages
        self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)
        self.assertIn(f"{LIB} (ModuleNotFoundError", proc.stdout)
        self.assertIn(f"{LIB}.ops (ModuleNotFoundError", proc.stdout)
        self.assertIn("2 module(s)", proc.stdout)
        self.assertIn(path, proc.stdout)
        ok = self.run_check(path, extra_path=self.site)  # the same Python with it installed
        self.assertEqual(ok.stdout.strip(), "OK", ok.stdout + ok.stderr)

    def test_load_check_refuses_an_extern_module_the_server_python_lacks(self):
        # Installed only where the packaging Python looks (a virtualenv, PYTHONPATH):
        # the check loads in the server's isolated Python and says what is missing.
        with self.assertRaises(LoadCheckError) as ctx:
            self.export("refused.mpk", load_check=True)
        message = str(ctx.exception)
        self.assertIn(f"{LIB} (ModuleNotFoundError", message)
        self.assertIn("no PYTHONPATH, no user site-packages", message)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "refused.mpk")))
        # Interned, the library travels in the archive and the check passes.
        self.export("interned_checked.mpk", load_check=True, intern=[LIB, f"{LIB}.**", "**"])

    def test_inspect_lists_extern_modules(self):
        path = self.export("net.mpk")
        env = dict(os.environ, PYTHONPATH=MANYPY_PYTHON)
        proc = subprocess.run(["/usr/bin/python3", "-m", "manypy.cli", "inspect", path],
                              capture_output=True, text=True, timeout=120, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        section = proc.stdout[proc.stdout.index("extern modules ("):]
        self.assertIn("the server's Python must provide them", section)
        lines = [l.strip() for l in section.splitlines()[1:]]
        self.assertEqual(sorted(lines), sorted(extern_list(path)[0]))
        self.assertIn(LIB, section.splitlines()[0])  # the top-level packages, in the heading


if __name__ == "__main__":
    unittest.main()
