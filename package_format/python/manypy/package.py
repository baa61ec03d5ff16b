"""Export PyTorch models as manypy model archives (package_format/SCHEMA.md).

An archive is a ``torch.package`` zip: the model's own modules are interned
(their source ships in the archive); every module installed in this Python
(torch, numpy, torchvision, the standard library and anything else in its
site-packages / dist-packages folders) is extern: the server's Python must
provide it, and the server refuses, naming them, an archive whose extern
modules it cannot import. Tensor storages are stored uncompressed
and 64-byte aligned by torch.package's writer, and ``manypy/manifest.json``
describes the entry point and the input/output signature.

    import manypy.package
    manypy.package.export(model, "net.mpk", name="net",
                          inputs=[("INPUT__0", "FP32", [16])],
                          example_inputs=(torch.randn(1, 16),), max_batch_size=8)

Public API: export, export_factory, load_model, read_manifest,
archive_entries, check_archive, example_inputs_for, datatype_of.

This module is the front door: export and export_factory tie together the
modules that do each job, and everything else is re-exported from them:
model_module.py (the model's module, __main__, training mode),
signature.py and value_specs.py (the signature from example runs),
weights.py (a factory's weights), dependencies.py (intern, extern, mock),
archive_writer.py (the archive written and checked before it is moved into
place), load_check.py (the check in a fresh server Python), reading.py
(reading and checking an archive), aoti.py (format "aoti").
"""

import os

from manypy_model_runtime import host as _runtime_host

from . import aoti
from . import load_check as _load_check
from . import manifest as _manifest
from . import model_module as _model
from .archive_writer import write_archive
from .dependencies import (DEFAULT_EXTERN, DEFAULT_INTERN, SERVER_API_MODULES,
                           SITE_FOLDER_NAMES, installed_modules)
from .layout import (OPTIONAL_MODULES_PACKAGE, OPTIONAL_MODULES_RESOURCE,
                     PICKLE_PACKAGE, PICKLE_RESOURCE, STORAGE_ALIGNMENT, USES_COMPILE_PACKAGE,
                     USES_COMPILE_RESOURCE, WEIGHTS_PACKAGE, WEIGHTS_RESOURCE)
from .model_module import import_model_module
from .reading import (archive_entries, check_archive, data_offset, load_torchscript,
                      read_manifest)
from .signature import resolve_signature, streaming_of
from .value_specs import as_args, datatype_of, example_inputs_for, output_index
from .weights import load_state_dict, load_weights

# What tests/server/models/make_server_test_models.py writes archives with.
_write_archive = write_archive

__all__ = ["export", "export_factory", "load_model", "read_manifest", "archive_entries",
           "check_archive", "example_inputs_for", "datatype_of", "output_index", "data_offset",
           "load_torchscript", "import_model_module", "installed_modules", "FORMATS",
           "DEFAULT_EXTERN", "DEFAULT_INTERN", "SERVER_API_MODULES", "SITE_FOLDER_NAMES",
           "PICKLE_PACKAGE", "PICKLE_RESOURCE", "WEIGHTS_PACKAGE", "WEIGHTS_RESOURCE",
           "OPTIONAL_MODULES_PACKAGE", "OPTIONAL_MODULES_RESOURCE", "USES_COMPILE_PACKAGE",
           "USES_COMPILE_RESOURCE", "STORAGE_ALIGNMENT"]


def export(model, path, name=None, version=1, inputs=None, outputs=None,
           example_inputs=None, max_batch_size=0, batching=None,
           instance_count=0, device="cpu", description="", intern=None,
           extern=None, method=None, modules=None, more_example_inputs=None,
           dynamic_dims=None, streaming=None, load_check=True, response_cache=False,
           sequence_batching=None, openai=None, format="python"):
    """Writes ``model`` to the archive ``path`` with entry point kind "pickle".

    format "aoti" writes an AOTInductor archive instead (platform torch_aoti,
    manypy.aoti.export: torch.export, compiled ahead of time, run by the
    server's libtorch without Python); the Python-only arguments (intern,
    extern, modules, streaming, sequence_batching) are refused with it.

    name defaults to the file name without extension. inputs/outputs are
    lists of {"name","datatype","shape"} dicts or (name, datatype, shape)
    tuples; shapes leave out the batch dimension when max_batch_size > 0.
    example_inputs (a tuple of positional arguments, or one tensor; BYTES
    inputs as nested lists of bytes) is run once under torch.inference_mode():
    it fills in outputs when outputs is None (and inputs when inputs is None)
    and otherwise checks that the declared signature matches.
    more_example_inputs is a list of further examples, each run the same way:
    dimensions that differ between the examples (or are 0 in one) become -1
    (variable). dynamic_dims ({tensor name: [dimension, ...]}, batch dimension
    excluded) marks dimensions -1 explicitly, e.g. {"boxes": [0]}. An output
    that is None for an example is left out of the signature (with a
    warning); a tuple's outputs keep their position in their names
    (OUTPUT__<index>), which is how the server finds them. The model may
    return a tensor, a tuple or list, a dict, or a list holding one dict
    (torchvision's detectors): a dict's keys name its outputs. batching is a
    dict (SCHEMA.md), True/False for dynamic on/off, or None. intern/extern
    are extra torch.package patterns, applied before the defaults: every
    module installed in this Python (installed_modules(), the standard
    library, torch, numpy, torchvision) is extern and the rest, the user's
    own code, is interned ("**"); nothing is mocked. An intern pattern can
    take an installed package into the archive. method names the attribute the
    server calls (default: model(...)). modules lists extra module names or
    objects to intern with their dependencies, e.g. the module that built a
    model whose classes live elsewhere. streaming (None: detected) says
    whether the method yields its responses (SCHEMA.md): it is detected when
    the method is a generator function or returns an iterator for the
    examples, whose yielded values then give the outputs' signature.
    response_cache lets a server started with --response-cache-bytes answer
    a request equal to an earlier one from its cache (SCHEMA.md): only for a
    model whose outputs depend on nothing but its inputs.
    sequence_batching (True, or a dict with max_sequence_idle_microseconds
    and max_concurrent_sequences) makes a stateful sequence model
    (SCHEMA.md): the model keeps per-sequence state in manypy.request.state.
    openai ({"routes", "inputs", "outputs"}, docs/text-generation.md) declares
    the OpenAI routes the model serves and maps their request fields onto its
    inputs and its outputs onto the answer; it is checked against the
    signature (a ValueError naming the route, the field and the tensor).
    load_check (default) then loads the archive in a fresh server Python as
    the server does, warms it up, runs the examples and compares their
    outputs with the eager model's (load_check.py); an archive that fails is
    not written (LoadCheckError, a ValueError, says why). Returns the
    manifest dict.
    """
    if format != "python":
        return _export_compiled(format, model, path, dict(
            name=name, version=version, inputs=inputs, outputs=outputs,
            example_inputs=example_inputs, max_batch_size=max_batch_size, batching=batching,
            instance_count=instance_count, device=device, description=description,
            method=method, more_example_inputs=more_example_inputs, dynamic_dims=dynamic_dims,
            load_check=load_check, response_cache=response_cache),
            dict(intern=intern, extern=extern, modules=modules, streaming=streaming,
                 sequence_batching=sequence_batching, openai=openai))
    _model.check_not_main(model)
    name = _model.default_name(name, path)
    results = []
    inputs, outputs, streamed = resolve_signature(model, inputs, outputs, example_inputs,
                                                  max_batch_size, method, more_example_inputs,
                                                  dynamic_dims, results)
    manifest = _manifest.build_manifest(
        name, version, {"kind": "pickle", "package": PICKLE_PACKAGE, "resource": PICKLE_RESOURCE},
        inputs, outputs, max_batch_size=max_batch_size, batching=batching,
        instance_count=instance_count, device=device, description=description,
        method=method, streaming=streaming_of(model, method, streamed, streaming),
        response_cache=response_cache, sequence_batching=sequence_batching,
        openai=openai)
    _model.warn_if_not_servable(model)
    module_names = [_model.module_name(m) for m in (modules or [])]

    def write(exporter):
        exporter.save_text(_manifest.MANIFEST_PACKAGE, _manifest.MANIFEST_RESOURCE,
                           _manifest.dumps(manifest))
        for module_name in module_names:
            exporter.save_module(module_name)
        exporter.save_pickle(PICKLE_PACKAGE, PICKLE_RESOURCE, model)

    check = _load_checker(path, manifest, example_inputs, more_example_inputs, results) \
        if load_check else None
    write_archive(path, write, intern, extern, check=check)
    return manifest


FORMATS = ("python", "aoti")


def _export_compiled(format, model, path, arguments, python_only):
    """export()/export_factory() for a format other than "python": refuses the
    arguments that only a Python archive has, then hands over to its module
    (manypy.aoti)."""
    if format not in FORMATS:
        raise ValueError(f"format: must be one of {FORMATS}, got {format!r}")
    for key, value in python_only.items():
        if value:
            raise ValueError(f"{key}: a {format!r} archive holds compiled code, no Python "
                             f"(leave {key} out, or use format 'python')")
    return aoti.export(model, path, **arguments)


def _load_checker(path, manifest, example_inputs, more_example_inputs, results):
    """The check write_archive runs on the finished archive: load_check.py's,
    with the examples export ran and their eager results."""
    examples = None
    if example_inputs is not None:
        examples = [as_args(example_inputs)] + [as_args(e) for e in (more_example_inputs or [])]

    def check(tmp, file_uses):
        eager = _load_check.eager_outputs(manifest, results) if examples else None
        _load_check.check_loads(tmp, examples, eager, manifest=manifest,
                                display_path=os.path.abspath(os.fspath(path)),
                                file_uses=file_uses)

    return check


def export_factory(module_file_or_name, factory="build", weights=None, path=None, *,
                   name=None, version=1, inputs=None, outputs=None,
                   example_inputs=None, max_batch_size=0, batching=None,
                   instance_count=0, device="cpu", description="", intern=None,
                   extern=None, method=None, check_weights=True, more_example_inputs=None,
                   dynamic_dims=None, streaming=None, load_check=True, response_cache=False,
                   sequence_batching=None, openai=None, format="python"):
    """Writes an archive with entry point kind "factory": the server imports
    the interned module and calls ``factory()`` (no arguments) to build the
    model. module_file_or_name is a path to a .py file or an importable
    module name. weights (a state dict, an nn.Module, or a path to a
    torch.save'd state dict) is stored as manypy/weights.pkl and replaces the
    model's parameters and buffers by name at load time. With check_weights
    (default) or example_inputs the factory is called once here, to check
    that the weights fit the model (load_state_dict, strict) and to run the
    example. Other arguments (load_check included) as in export(). Returns
    the manifest dict.

    format "aoti" calls the factory here, loads the weights into the model
    and compiles it as export(format="aoti") does: the archive holds the
    compiled model, not the factory.
    """
    if path is None:
        raise TypeError("export_factory() needs path, the archive to write")
    _model.refuse_compile_before_torch2(module_file_or_name)
    module = import_model_module(module_file_or_name)
    module_name = _model.module_name(module)
    fn = getattr(module, factory, None)
    if not callable(fn):
        raise ValueError(f"factory: module {module_name!r} has no callable {factory!r}")
    state_dict = load_weights(weights) if weights is not None else None
    if format != "python":
        model = fn()
        if state_dict is not None:
            load_state_dict(model, state_dict)
        return _export_compiled(format, model, path, dict(
            name=name, version=version, inputs=inputs, outputs=outputs,
            example_inputs=example_inputs, max_batch_size=max_batch_size, batching=batching,
            instance_count=instance_count, device=device, description=description,
            method=method, more_example_inputs=more_example_inputs, dynamic_dims=dynamic_dims,
            load_check=load_check, response_cache=response_cache),
            dict(intern=intern, extern=extern, streaming=streaming,
                 sequence_batching=sequence_batching, openai=openai))
    name = _model.default_name(name, path)

    model = None
    streamed = False
    results = []
    if example_inputs is not None or (state_dict is not None and check_weights):
        model = fn()
        if state_dict is not None:
            load_state_dict(model, state_dict)
    if example_inputs is not None:
        _model.warn_if_not_servable(model)
        inputs, outputs, streamed = resolve_signature(model, inputs, outputs, example_inputs,
                                                      max_batch_size, method,
                                                      more_example_inputs, dynamic_dims, results)
    elif outputs is None or inputs is None:
        raise ValueError("outputs: inputs and outputs are required unless example_inputs is given")

    entry = {"kind": "factory", "module": module_name, "function": factory}
    if state_dict is not None:
        entry["weights"] = {"package": WEIGHTS_PACKAGE, "resource": WEIGHTS_RESOURCE}
    manifest = _manifest.build_manifest(
        name, version, entry, inputs, outputs, max_batch_size=max_batch_size,
        batching=batching, instance_count=instance_count, device=device,
        description=description, method=method,
        streaming=streaming_of(model, method, streamed, streaming),
        response_cache=response_cache, sequence_batching=sequence_batching,
        openai=openai)

    def write(exporter):
        exporter.save_text(_manifest.MANIFEST_PACKAGE, _manifest.MANIFEST_RESOURCE,
                           _manifest.dumps(manifest))
        exporter.save_module(module_name)
        if state_dict is not None:
            exporter.save_pickle(WEIGHTS_PACKAGE, WEIGHTS_RESOURCE, state_dict)

    check = _load_checker(path, manifest, example_inputs, more_example_inputs, results) \
        if load_check else None
    write_archive(path, write, intern, extern, required_intern=module_name, check=check)
    return manifest


def load_model(path, device="cpu"):
    """Loads an archive the way the server does, in this interpreter:
    returns (model, manifest). After check_archive, a Python archive goes
    through the server's own loader (the package manypy_model_runtime, via
    its host.py): its extern modules imported first, the entry point
    built over storages mapped from the file, eval mode, no gradients, on
    `device`. A reference for tests and users; load_check.py does the same in
    a fresh process."""
    manifest = check_archive(path)
    if manifest["platform"] == _manifest.TORCHSCRIPT_PLATFORM:
        return load_torchscript(path, manifest), manifest
    if manifest["platform"] == _manifest.AOTI_PLATFORM:
        return aoti.Loaded(path, manifest), manifest
    model, _ = _runtime_host.load(os.fspath(path), device=device)
    return model, manifest
