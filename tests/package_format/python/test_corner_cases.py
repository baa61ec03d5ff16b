"""Issue 28 item 3: torch.package corner cases that real model code hits,
each packaged as a new user would (`manypy-package create` on a model file)
and then either served as the eager model (loaded by the server's own
loader, bit-equal outputs) or refused when packaging, with a message saying
what to change. The table in docs/packaging.md lists the same cases."""
import json
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
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import torch  # noqa: E402
from torch.package import PackageImporter  # noqa: E402

import manypy.package as P  # noqa: E402
from test_cli import run_cli  # noqa: E402

# --- module-level code that looks itself up in sys.modules -------------------

DATACLASS_FUTURE = '''\
from __future__ import annotations

import dataclasses

import torch


@dataclasses.dataclass
class Config:
    width: int = 3
    scale: float = 2.0


class Net(torch.nn.Module):
    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.fc = torch.nn.Linear(4, config.width)

    def forward(self, x):
        return self.fc(x) * self.config.scale


def build():
    torch.manual_seed(0)
    return Net(Config()).eval()
'''

TYPING_FUTURE = '''\
from __future__ import annotations

import typing
from typing import NamedTuple, TypedDict

import torch

Width = int      # annotations naming the module's own globals: resolving them
Scale = float    # needs the module, which typing finds by name in sys.modules


class Spec(NamedTuple):
    width: Width
    scale: Scale


class Extra(TypedDict):
    bias: Scale


# Resolving string annotations needs the module's globals, found by name.
SPEC_HINTS = typing.get_type_hints(Spec)
EXTRA_HINTS = typing.get_type_hints(Extra)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.spec = Spec(SPEC_HINTS["width"](3), SPEC_HINTS["scale"]("2.5"))
        self.extra: Extra = {"bias": EXTRA_HINTS["bias"](1)}
        self.fc = torch.nn.Linear(4, self.spec.width)

    def forward(self, x):
        return self.fc(x) * self.spec.scale + self.extra["bias"]


def build():
    torch.manual_seed(0)
    return Net().eval()
'''

PYDANTIC_STYLE = '''\
from __future__ import annotations

import sys

import torch


class Settings:
    """Fields from class annotations, resolved in the class's own module, as
    pydantic's BaseModel does when a class is defined."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        namespace = vars(sys.modules[cls.__module__])
        cls.fields = {name: eval(annotation, namespace)
                      for name, annotation in cls.__dict__.get("__annotations__", {}).items()}

    def __init__(self, **values):
        for name, kind in self.fields.items():
            setattr(self, name, kind(values.get(name, getattr(type(self), name))))


class NetSettings(Settings):
    width: int = 3
    scale: float = 2


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.settings = NetSettings(scale="1.5")
        self.fc = torch.nn.Linear(4, self.settings.width)

    def forward(self, x):
        return self.fc(x) * self.settings.scale


def build():
    torch.manual_seed(0)
    return Net().eval()
'''

# --- __file__-relative resources ---------------------------------------------

FILE_AT_IMPORT = '''\
import os

import torch

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale.txt")) as f:
    SCALE = float(f.read())


class Net(torch.nn.Module):
    def forward(self, x):
        return x * SCALE


def build():
    return Net().eval()
'''

FILE_IN_INIT = '''\
import os

import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "scale.txt")) as f:
            self.scale = float(f.read())

    def forward(self, x):
        return x * self.scale


def build():
    return Net().eval()
'''

# --- relative imports between interned files ---------------------------------

PACKAGE_FILES = {
    "mynets/__init__.py": "",
    "mynets/layers.py": '''\
import torch


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))
''',
    "mynets/heads/__init__.py": "from .linear import Head\n",
    "mynets/heads/linear.py": '''\
import torch

from ..layers import Block


class Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.out(self.block(x))
''',
    "mynets/net.py": '''\
import torch

from . import layers
from .heads import Head


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first = layers.Block()
        self.head = Head()

    def forward(self, x):
        return self.head(self.first(x))


def build():
    torch.manual_seed(0)
    return Net().eval()
''',
}

# --- optional and missing dependencies ---------------------------------------

OPTIONAL_IMPORT = '''\
import torch

try:
    import {lib} as accel
except ImportError:  # the model runs without it, only slower
    accel = None


class Net(torch.nn.Module):
    def forward(self, x):
        if accel is not None:
            return accel.double(x)
        return x * 2


def build():
    return Net().eval()
'''

REQUIRED_IMPORT = '''\
import torch

import {lib} as accel


class Net(torch.nn.Module):
    def forward(self, x):
        return accel.double(x)


def build():
    return Net().eval()
'''

IMPORT_IN_FORWARD = '''\
import torch


class Net(torch.nn.Module):
    def forward(self, x):
        import manypy_corner_case_absent_lib
        return manypy_corner_case_absent_lib.double(x)


def build():
    return Net().eval()
'''

ABSENT = "manypy_corner_case_absent_lib"     # installed nowhere
FAKE_LIB = "manypy_corner_case_accel"        # installed in a temporary site-packages only


class CornerCaseTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="manypy-corner-cases-")
        files = {"dataclass_future.py": DATACLASS_FUTURE, "typing_future.py": TYPING_FUTURE,
                 "pydantic_style.py": PYDANTIC_STYLE, "file_at_import.py": FILE_AT_IMPORT,
                 "file_in_init.py": FILE_IN_INIT, "scale.txt": "2.5\n",
                 "optional_absent.py": OPTIONAL_IMPORT.format(lib=ABSENT),
                 "required_absent.py": REQUIRED_IMPORT.format(lib=ABSENT),
                 "optional_accel.py": OPTIONAL_IMPORT.format(lib=FAKE_LIB),
                 "required_accel.py": REQUIRED_IMPORT.format(lib=FAKE_LIB),
                 "import_in_forward.py": IMPORT_IN_FORWARD}
        files.update(PACKAGE_FILES)
        for name, text in files.items():
            path = os.path.join(cls.tmp, "project", name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        # A library installed only where this packaging Python looks (a
        # site-packages folder of its own), never in the server's Python.
        cls.site = os.path.join(cls.tmp, "venv", "site-packages")
        os.makedirs(os.path.join(cls.site, FAKE_LIB))
        with open(os.path.join(cls.site, FAKE_LIB, "__init__.py"), "w") as f:
            f.write("CALLS = []\n\ndef double(x):\n    CALLS.append(1)\n    return x + x\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def project(self, name):
        return os.path.join(self.tmp, "project", name)

    def create(self, model_file, out, *extra, with_site=False):
        pythonpath = MANYPY_PYTHON + (os.pathsep + self.site if with_site else "")
        module = os.path.splitext(os.path.basename(model_file))[0]
        return run_cli(["create", "--model-file", self.project(model_file), "--factory",
                        f"{module}:build", "--input", "X:FP32:4", "--max-batch-size", "4",
                        "-o", out] + list(extra), pythonpath=pythonpath, cwd=self.tmp)

    def assert_created(self, proc):
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("load check: loads in a fresh", proc.stdout)

    def assert_serves_as_eager(self, archive, model_file):
        """The archive, loaded by the server's own loader in this process,
        answers bit-equal to the eager model built from the file."""
        sys.path.insert(0, os.path.join(self.tmp, "project"))
        try:
            eager = P.import_model_module(self.project(model_file)).build()
        finally:
            sys.path.pop(0)
        loaded, _ = P.load_model(archive)
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(7))
        with torch.inference_mode():
            self.assertTrue(torch.equal(loaded(x), eager(x)))

    def out(self, name):
        return os.path.join(self.tmp, name + ".mpk")

    # sys.modules lookups ---------------------------------------------------

    def test_dataclass_with_future_annotations_serves(self):
        # The ninth model: torch.package alone fails it as reported.
        out = self.out("dataclass_future")
        self.assert_created(self.create("dataclass_future.py", out))
        with self.assertRaisesRegex(AttributeError, "'NoneType' object has no attribute '__dict__'"):
            PackageImporter(out).load_pickle("model", "model.pkl")
        self.assert_serves_as_eager(out, "dataclass_future.py")

    def test_dataclass_with_future_annotations_as_factory_serves(self):
        out = self.out("dataclass_future_factory")
        self.assert_created(self.create("dataclass_future.py", out, "--as-factory"))
        self.assert_serves_as_eager(out, "dataclass_future.py")

    def test_named_tuple_typed_dict_and_get_type_hints_serve(self):
        out = self.out("typing_future")
        self.assert_created(self.create("typing_future.py", out))
        self.assert_serves_as_eager(out, "typing_future.py")

    def test_pydantic_style_class_resolving_annotations_by_module_serves(self):
        out = self.out("pydantic_style")
        self.assert_created(self.create("pydantic_style.py", out, "--as-factory"))
        self.assert_serves_as_eager(out, "pydantic_style.py")

    # __file__ ----------------------------------------------------------------

    def test_file_relative_read_at_import_is_refused_saying_what_to_change(self):
        out = self.out("file_at_import")
        proc = self.create("file_at_import.py", out)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("FileNotFoundError", proc.stderr)
        self.assertIn("at file_at_import.py:5 in <module>", proc.stderr)
        self.assertIn("finds files through __file__ (file_at_import.py:5)", proc.stderr)
        self.assertIn("read the file while building the model", proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_file_relative_read_while_building_a_pickled_model_serves(self):
        out = self.out("file_in_init")
        self.assert_created(self.create("file_in_init.py", out))
        self.assert_serves_as_eager(out, "file_in_init.py")

    def test_file_relative_read_in_a_factory_the_server_calls_is_refused(self):
        out = self.out("file_in_init_factory")
        proc = self.create("file_in_init.py", out, "--as-factory")
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("(loading): FileNotFoundError", proc.stderr)
        self.assertIn("at file_in_init.py:9 in __init__", proc.stderr)
        self.assertIn("packaged with the default --pickle kind", proc.stderr)

    # relative imports --------------------------------------------------------

    def test_relative_imports_between_interned_files_serve(self):
        out = self.out("relative")
        proc = run_cli(["create", "--model-file", self.project("mynets/net.py"), "--factory",
                        "net:build", "--input", "X:FP32:4", "--max-batch-size", "4", "-o", out],
                       cwd=self.tmp)
        self.assert_created(proc)
        with zipfile.ZipFile(out) as zf:
            names = {n.split("/", 1)[1] for n in zf.namelist()}
        for file, source in PACKAGE_FILES.items():
            if source:  # torch.package writes no file for an empty __init__.py
                self.assertIn(file, names)
        self.assert_serves_as_eager(out, "mynets/net.py")

    # optional and missing dependencies -------------------------------------

    def test_optional_dependency_missing_everywhere_serves_the_fallback(self):
        out = self.out("optional_absent")
        self.assert_created(self.create("optional_absent.py", out))
        self.assert_serves_as_eager(out, "optional_absent.py")

    def test_optional_dependency_installed_here_but_not_on_the_server_serves(self):
        out = self.out("optional_accel")
        # Packaged where the library is installed: extern, and optional.
        self.assert_created(self.create("optional_accel.py", out, with_site=True))
        with zipfile.ZipFile(out) as zf:
            top = zf.namelist()[0].split("/", 1)[0]
            self.assertIn(FAKE_LIB, zf.read(f"{top}/.data/extern_modules").decode().split())
            self.assertEqual(zf.read(f"{top}/manypy/optional_modules").decode().split(), [FAKE_LIB])
        # The server's loader, in a Python without the library (the load check's
        # already was one), then in one with it: each runs the path it can.
        self.assertEqual(self.serve_in_fresh_python(out, with_site=False), {"accel": False, "y": 4.0})
        self.assertEqual(self.serve_in_fresh_python(out, with_site=True), {"accel": True, "y": 4.0})

    def serve_in_fresh_python(self, archive, with_site):
        script = textwrap.dedent('''\
            import json, sys, torch
            sys.path.insert(0, sys.argv[1])
            from manypy_model_runtime import host as server_runtime
            model, manifest = server_runtime.load(sys.argv[2])
            (y,) = server_runtime.infer(model, manifest, [torch.full((1, 4), 2.0)])
            accel = type(model).forward.__globals__["accel"]
            print(json.dumps({"accel": accel is not None, "y": y[0, 0].item()}))
            ''')
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if with_site:
            env["PYTHONPATH"] = self.site
        proc = subprocess.run(["/usr/bin/python3", "-c", script, MANYPY_PYTHON, archive],
                              capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return json.loads(proc.stdout.strip().splitlines()[-1])

    def test_required_dependency_the_server_python_lacks_is_refused(self):
        out = self.out("required_accel")
        proc = self.create("required_accel.py", out, with_site=True)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn(f"cannot import: {FAKE_LIB} (ModuleNotFoundError", proc.stderr)
        self.assertIn("Install them where the server runs, or package them into the archive",
                      proc.stderr)
        self.assertFalse(os.path.exists(out))

    def test_required_dependency_missing_here_is_refused_saying_what_to_do(self):
        out = self.out("required_absent")
        proc = self.create("required_absent.py", out)
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn(f"No module named '{ABSENT}'. Install {ABSENT} here (the server's Python "
                      f"needs it too", proc.stderr)
        self.assertIn("or import it inside try/except ImportError", proc.stderr)

    def test_import_in_forward_of_a_missing_module_is_refused_at_warm_up(self):
        # With outputs declared the model is not run here; the check's warm-up runs it.
        out = self.out("import_in_forward")
        proc = self.create("import_in_forward.py", out, "--output", "Y:FP32:4")
        self.assertEqual(proc.returncode, 1, proc.stdout)
        self.assertIn("(warm-up (the server's: zeros from the signature)): ModuleNotFoundError",
                      proc.stderr)
        self.assertIn("at import_in_forward.py:6 in forward", proc.stderr)
        self.assertIn("torch.package leaves out a module it cannot import", proc.stderr)


if __name__ == "__main__":
    unittest.main()
