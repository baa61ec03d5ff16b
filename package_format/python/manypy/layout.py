"""Where a manypy archive keeps what the packaging tool writes besides the
manifest (package_format/SCHEMA.md): (package, resource) pairs as
torch.package names them, and the alignment of tensor storages. Plain
Python."""

PICKLE_PACKAGE, PICKLE_RESOURCE = "model", "model.pkl"
WEIGHTS_PACKAGE, WEIGHTS_RESOURCE = "manypy", "weights.pkl"
# Extern modules that only imports inside try/except ImportError need, one a
# line; the server loads the archive without them (manypy_model_runtime).
OPTIONAL_MODULES_PACKAGE, OPTIONAL_MODULES_RESOURCE = "manypy", "optional_modules"
# Present when the archive's code calls torch.compile (SCHEMA.md).
USES_COMPILE_PACKAGE, USES_COMPILE_RESOURCE = "manypy", "uses_torch_compile"
STORAGE_ALIGNMENT = 64
