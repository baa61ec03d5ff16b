"""`manypy` is one package spread over package_format/python/manypy/ (the
packaging tool) and clients/python/manypy/ (the client): both __init__.py
files extend __path__ with pkgutil.extend_path and must stay identical,
since whichever folder comes first on sys.path runs its own copy.

No server needed; the generated stubs (build/python) are found the way
manypy.client finds them (MANYPY_PROTO_PYTHON, PYTHONPATH, build/python).
"""
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PACKAGING_DIR = os.path.join(REPO, "package_format", "python")
CLIENT_DIR = os.path.join(REPO, "clients", "python")

CHECK = """
import manypy
assert manypy.__version__ and manypy.SCHEMA_VERSION == 2
manypy.client  # the lazy attribute, before any `import manypy.client`
import manypy.client, manypy.manifest
from manypy.client import InferenceClient
print(manypy.__file__)
"""


class PackageLayoutTest(unittest.TestCase):
    def test_init_files_identical(self):
        with open(os.path.join(PACKAGING_DIR, "manypy", "__init__.py"), "rb") as a, \
             open(os.path.join(CLIENT_DIR, "manypy", "__init__.py"), "rb") as b:
            self.assertEqual(a.read(), b.read(),
                             "package_format/python/manypy/__init__.py and "
                             "clients/python/manypy/__init__.py differ")

    def test_import_either_order(self):
        for first, second in ((PACKAGING_DIR, CLIENT_DIR), (CLIENT_DIR, PACKAGING_DIR)):
            env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
            rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                    if p and p not in (first, second)]
            env["PYTHONPATH"] = os.pathsep.join([first, second] + rest)
            done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True,
                                  text=True, env=env, timeout=120)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stdout.strip(), os.path.join(first, "manypy", "__init__.py"))


if __name__ == "__main__":
    unittest.main()
