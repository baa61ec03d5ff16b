"""manypy.source_scan: which extern modules only guarded imports need (the
archive's manypy/optional_modules), and where interned code uses __file__."""
import os
import sys
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "package_format", "python"))

from torch.package._digraph import DiGraph  # noqa: E402

from manypy import source_scan  # noqa: E402

NET = textwrap.dedent('''\
    import torch
    try:
        import fast_lib
        from accel import kernels
    except ImportError:
        fast_lib = kernels = None
    try:
        import strict_lib
    except ValueError:   # does not catch a failed import
        strict_lib = None
    import both_lib
    try:
        import both_lib.extra
    except ModuleNotFoundError:
        pass
    try:
        def later():
            import lazy_lib   # runs when called, outside the try
    except ImportError:
        pass
    from .sibling import helper
    PATH = __file__
    ''')


def graph(extra_edges=()):
    g = DiGraph()
    g.add_node("pkg.net", source=NET, is_package=False)
    for dep in ("torch", "fast_lib", "accel.kernels", "strict_lib", "both_lib", "both_lib.extra",
                "lazy_lib", "pkg.sibling"):
        g.add_node(dep)
        g.add_edge("pkg.net", dep)
    for src, dst in extra_edges:
        g.add_node(src)
        g.add_edge(src, dst)
    return g


class SourceScanTest(unittest.TestCase):
    def test_imports_know_which_are_guarded_and_resolve_relative_ones(self):
        found = {(name, guarded) for name, guarded, _ in source_scan.imports(NET, "pkg.net", False)}
        self.assertIn(("fast_lib", True), found)
        self.assertIn(("accel.kernels", True), found)
        self.assertIn(("strict_lib", False), found)
        self.assertIn(("lazy_lib", False), found)
        self.assertIn(("pkg.sibling.helper", False), found)

    def test_optional_externs_are_guarded_everywhere_and_needed_by_no_pickle(self):
        externs = ["torch", "fast_lib", "accel.kernels", "strict_lib", "both_lib",
                   "both_lib.extra", "lazy_lib"]
        self.assertEqual(source_scan.optional_externs(graph(), externs),
                         ["accel.kernels", "both_lib.extra", "fast_lib"])
        # A pickled object of fast_lib's makes it required.
        with_pickle = graph([("<model.model.pkl>", "fast_lib")])
        self.assertEqual(source_scan.optional_externs(with_pickle, externs),
                         ["accel.kernels", "both_lib.extra"])

    def test_file_uses(self):
        self.assertEqual(source_scan.file_uses(graph()), [("pkg/net.py", 22)])


if __name__ == "__main__":
    unittest.main()
