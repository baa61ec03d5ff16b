"""Archives for the ``torchscript`` platform: the model compiled to a
TorchScript module that the server runs from C++ threads with libtorch, with
no Python interpreter in the request path (the paper's comparison point, and
what users coming from TorchServe or Triton's libtorch backend know).

Same manifest, same packaging tool, same protocol and scheduler as a Python
archive; only the platform and the entry point differ:

    import manypy.torchscript
    manypy.torchscript.export(model, "net-ts.mpk", name="net_ts",
                              example_inputs=(torch.randn(1, 16),), max_batch_size=8)

Limits (SCHEMA.md): tensor inputs and outputs only (no BYTES), and a running
call cannot be interrupted by the server's execution limit.
"""

import io

import torch

from . import manifest as _manifest
from .archive_writer import write_archive
from .model_module import default_name
from .reading import load_torchscript, read_manifest
from .signature import resolve_signature
from .value_specs import as_args

TORCHSCRIPT_PACKAGE, TORCHSCRIPT_RESOURCE = _manifest.TORCHSCRIPT_PACKAGE, _manifest.TORCHSCRIPT_RESOURCE
MODES = ("script", "trace")


def compile_model(model, mode="script", example_inputs=None):
    """The model as a torch.jit.ScriptModule, in eval mode: returned as is if
    it already is one; else compiled with torch.jit.script (mode "script") or
    recorded with torch.jit.trace on example_inputs (mode "trace": control
    flow that depends on the data is frozen to the example's path)."""
    if isinstance(model, torch.jit.ScriptModule):
        return model.eval()
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if mode not in MODES:
        raise ValueError(f"mode: must be one of {MODES}, got {mode!r}")
    model = model.eval()
    if mode == "script":
        try:
            return torch.jit.script(model)
        except Exception as e:  # torch.jit raises several unrelated types
            raise ValueError(f"torch.jit.script could not compile the model ({type(e).__name__}: "
                             f"{e}); mode='trace' with example inputs may work") from e
    if example_inputs is None:
        raise ValueError("example_inputs: mode 'trace' needs example inputs to record")
    with torch.no_grad():
        return torch.jit.trace(model, as_args(example_inputs))


def export(model, path, name=None, version=1, inputs=None, outputs=None, example_inputs=None,
           mode="script", max_batch_size=0, batching=None, instance_count=0, device="cpu",
           description="", method=None, dynamic_dims=None, response_cache=False):
    """Writes ``model`` (an nn.Module, compiled per ``mode``, or a ScriptModule)
    to the archive ``path`` for platform "torchscript". The signature comes
    from inputs/outputs, example_inputs and dynamic_dims as in
    manypy.package.export, run on the compiled module. Returns the manifest
    dict."""
    scripted = compile_model(model, mode, example_inputs)
    name = default_name(name, path)
    inputs, outputs, _ = resolve_signature(scripted, inputs, outputs, example_inputs,
                                           max_batch_size, method, dynamic_dims=dynamic_dims)
    for field, specs in (("inputs", inputs), ("outputs", outputs)):
        for i, spec in enumerate(specs):
            if spec["datatype"] == "BYTES":
                raise ValueError(f"{field}[{i}].datatype: BYTES; the torchscript platform takes "
                                 "tensors only (use manypy.package.export for string tensors)")
    manifest = _manifest.build_manifest(
        name, version,
        {"kind": "torchscript", "package": TORCHSCRIPT_PACKAGE, "resource": TORCHSCRIPT_RESOURCE},
        inputs, outputs, max_batch_size=max_batch_size, batching=batching,
        instance_count=instance_count, device=device, description=description, method=method,
        platform=_manifest.TORCHSCRIPT_PLATFORM, response_cache=response_cache)
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)

    def write(exporter):
        exporter.save_text(_manifest.MANIFEST_PACKAGE, _manifest.MANIFEST_RESOURCE,
                           _manifest.dumps(manifest))
        exporter.save_binary(TORCHSCRIPT_PACKAGE, TORCHSCRIPT_RESOURCE, buffer.getvalue())

    write_archive(path, write, intern=None, extern=None)
    return manifest


def load(path):
    """The archive's TorchScript module (for tests and tools), with its manifest."""
    manifest = read_manifest(path)
    if manifest["platform"] != _manifest.TORCHSCRIPT_PLATFORM:
        raise ValueError(f"{path}: platform {manifest['platform']!r} is not torchscript")
    return load_torchscript(path, manifest), manifest
