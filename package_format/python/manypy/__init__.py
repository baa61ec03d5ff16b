"""manypy: package PyTorch models for the manypy model server.

    import manypy.package
    manypy.package.export(model, "net.mpk", name="net", inputs=[...], example_inputs=(...))

`manypy.manifest` builds and validates manifests (package_format/SCHEMA.md)
without importing torch; `manypy.package` (imports torch) writes and reads
archives; `manypy.cli` is the `manypy-package` command line tool;
`manypy.client` is the Open Inference Protocol client (`manypy-client`).
"""

__version__ = "0.1.0"
SCHEMA_VERSION = 1

__all__ = ["SCHEMA_VERSION", "__version__"]


def __getattr__(name):
    # `import manypy; manypy.package.export(...)` works without making every
    # `import manypy` (e.g. the CLI's inspect) pay for importing torch.
    if name in ("package", "manifest", "cli", "client"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'manypy' has no attribute {name!r}")
