"""manypy: package PyTorch models for the manypy model server, and talk to it.

    import manypy.package
    manypy.package.export(model, "net.mpk", name="net", inputs=[...], example_inputs=(...))

`manypy` is one package spread over two folders: package_format/python/manypy/
holds the packaging tool and clients/python/manypy/ the client. Put both
folders on sys.path (in either order) to import everything:

    PYTHONPATH=package_format/python:clients/python:build/python

`manypy.manifest` builds and validates manifests (package_format/SCHEMA.md)
without importing torch; `manypy.package` (imports torch) writes and reads
archives; `manypy.cli` is the `manypy-package` command line tool (these three
need only package_format/python). `manypy.client` is the Open Inference
Protocol client (`manypy-client`; needs clients/python, and the generated
stubs in build/python).

This file exists twice, as package_format/python/manypy/__init__.py and
clients/python/manypy/__init__.py, with the same content: whichever folder
comes first on sys.path runs its copy, which extends __path__ with the other.
Keep the two copies identical.
"""
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

__version__ = "0.1.0"
SCHEMA_VERSION = 2

__all__ = ["SCHEMA_VERSION", "__version__"]


def __getattr__(name):
    # `import manypy; manypy.package.export(...)` works without making every
    # `import manypy` (e.g. the CLI's inspect) pay for importing torch.
    if name in ("package", "manifest", "cli", "client"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    # What a model's Python calls (inside manypy-server the server's own
    # module answers them; here, manypy.serving's stand-ins).
    if name in ("infer", "submit", "request", "log", "metrics", "trace", "InferenceError", "Future"):
        from . import serving
        return getattr(serving, name)
    raise AttributeError(f"module 'manypy' has no attribute {name!r}")
