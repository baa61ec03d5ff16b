"""Archives for the ``torch_aoti`` platform: the model captured by
``torch.export`` with its batch dimension dynamic, compiled ahead of time by
AOTInductor into a shared object (``torch._inductor.aoti_compile_and_package``
writes it as a ``.pt2`` package), and run by the server's libtorch (its
AOTInductor runtime, server/lifecycle/aoti_model.h) from C++ threads: no
interpreter, no GIL, no Python at serving time.

    import manypy.package
    manypy.package.export(model, "net.mpk", format="aoti", name="net",
                          example_inputs=(torch.randn(1, 16),), max_batch_size=8)

The ``.pt2`` is stored uncompressed in the manypy archive beside the manifest
(``model/model.pt2``). Needs PyTorch >= 2.6 (the first Debian ships with the
C++ package loader), a C++ compiler and python3-setuptools where it is
packaged; the server needs neither. The package runs only under the PyTorch
version it was compiled with (``packaged_with.torch``) and on CPUs with the
vector instructions of the machine that compiled it (docs/operations.md).
Loading an archive and the load check live in aoti_load.py; their public
names are importable from here too.
"""

import os
import shutil
import tempfile

import torch

from . import aoti_load as _load
from . import manifest as _manifest
from .archive_writer import write_archive
from .model_module import default_name
from .signature import resolve_signature
from .value_specs import as_args, example_inputs_for, split_outputs
# manypy.aoti.load, .Loaded, .RTOL, ... as the CLI, tests and tools name them.
from .aoti_load import ATOL, MIN_TORCH, RTOL, Loaded, check_loads, load, torch_problem  # noqa: F401
from .aoti_prepack import PrepackConvolutionWeights

AOTI_PACKAGE, AOTI_RESOURCE = _manifest.AOTI_PACKAGE, _manifest.AOTI_RESOURCE

# Inductor's CPU options for the compile (torch/_inductor/config.py, 2.6):
# - freezing: the weights become constants of the graph, so Inductor folds
#   them (batch norm into convolutions, transposes, dtype casts) and can
#   prepack them; without it the weights stay inputs of every call, and
#   resnet18 ran at 0.6x eager (issue 41), with it 1.6x.
#   Inductor freezes only when gradients are off (compile_fx.py: "if
#   config.freezing and not torch.is_grad_enabled()"), so compile_package
#   compiles under torch.no_grad().
# - cpp.weight_prepack (on by default; written so the choice is visible):
#   under freezing, convolution and linear weights are packed once at compile
#   time into oneDNN's (mkldnn) blocked layout, so each call skips reordering
#   them.
# - cpp.dynamic_threads: the compiled kernels' OpenMP regions take the thread
#   count of the calling thread at run time (the server's intra-op setting)
#   instead of `num_threads(N)` fixed to the packaging machine's
#   torch.get_num_threads(): a server running two models' calls at once on 2
#   cores would otherwise run 2 x N threads. Inductor notes a slight cost for a
#   single thread.
# - post_grad_custom_pre_pass (aoti_prepack.py): Inductor prepacks a
#   convolution's weight only when its input shape is static, and an
#   archive's batch dimension is dynamic; this pass prepacks them anyway, for
#   the traced shape (resnet18 at batch 1, one thread: 1.2x eager without it,
#   1.5-2.0x with it, as a static batch).
# Left as it is: max_autotune (benchmarks GEMM templates while compiling:
# minutes per model on 2 cores).
INDUCTOR_CONFIGS = {"freezing": True, "cpp.weight_prepack": True, "cpp.dynamic_threads": True}

_PYTHON_HINT = ("package it for the Python platform instead (manypy.package.export without "
                "format='aoti'; manypy-package create without --format aoti): the server runs "
                "any Python there")


class _Method(torch.nn.Module):
    """The model's `method` as a module's forward: torch.export captures forward."""

    def __init__(self, model, method):
        super().__init__()
        self.model = model
        self.method = method

    def forward(self, *args):
        return getattr(self.model, self.method)(*args)


def _widened(value, dims):
    """`value` repeated along each dimension in `dims` whose size is below 2:
    torch.export specializes a dimension of size 0 or 1 to that size, so the
    example it traces needs at least 2 where the dimension is dynamic. Only
    the traced shapes matter, not the values."""
    for d in dims:
        if value.shape[d] == 1:
            value = torch.cat([value, value], dim=d)
    return value


def _dynamic_dims(inputs, max_batch_size):
    """Per input, {dimension of the tensor as called: torch.export.Dim}: the
    batch dimension (one Dim shared by every input, 1..max_batch_size) and
    each -1 of the manifest's shape."""
    Dim = torch.export.Dim
    batch = Dim("batch", min=1, max=max_batch_size) if max_batch_size > 1 else None
    offset = 1 if max_batch_size > 0 else 0
    per_input = []
    for i, spec in enumerate(inputs):
        dims = {0: batch} if batch is not None else {}
        for j, d in enumerate(spec["shape"]):
            if d == -1:
                dims[j + offset] = Dim(f"input{i}_dim{j + offset}")
        per_input.append(dims)
    return per_input


def export_program(model, args, inputs, max_batch_size, method=None):
    """torch.export's ExportedProgram of `model` (its `method`) for positional
    `args`, the batch dimension and the manifest's -1 dimensions dynamic. A
    model torch.export cannot capture is a ValueError with export's reason."""
    _load.check_torch()
    target = model if method in (None, "forward") else _Method(model, method)
    per_input = _dynamic_dims(inputs, max_batch_size)
    traced = tuple(_widened(a, sorted(d)) for a, d in zip(args, per_input))
    dynamic = tuple(d or None for d in per_input)
    if target is not model:  # _Method.forward(*args): export binds them as one "args"
        dynamic = {"args": dynamic}
    try:
        return torch.export.export(target, traced, dynamic_shapes=dynamic)
    except Exception as e:  # export raises many unrelated types (UserError, Unsupported, ...)
        reason = str(e).strip()
        if len(reason) > 3000:
            reason = reason[:3000] + " [...]"
        raise ValueError(f"torch.export cannot capture the model, so it cannot be compiled "
                         f"ahead of time ({type(e).__name__}: {reason}); {_PYTHON_HINT}") from e


def _output_leaves(result):
    """The model's result as the flat list AOTInductor returns (pytree order:
    a dict's values in insertion order, a tuple's or list's in position)."""
    leaves, _ = torch.utils._pytree.tree_flatten(result)
    return leaves


def _outputs_in_flat_order(outputs, result):
    """The manifest's outputs reordered as the compiled model returns them
    (the server maps its flat results to outputs by position). Every tensor
    the model returns must be served: the compiled model returns them all."""
    leaves = _output_leaves(result)
    named = split_outputs(result, outputs)
    if any(v is None for _, v in named) or len(named) != len(leaves):
        raise ValueError(f"outputs: the model returns {len(leaves)} tensors in a structure the "
                         f"torch_aoti platform does not name (a tensor, a tuple or list of "
                         f"tensors, or a dict of str to tensor, without None); {_PYTHON_HINT}")
    if len(outputs) != len(leaves):
        raise ValueError(f"outputs: {len(outputs)} declared, the model returns {len(leaves)}; "
                         f"an AOTInductor archive serves every output")
    by_name = {o["name"]: o for o in outputs}
    keys = [k for k, _ in named]
    if all(k is not None for k in keys):  # a dict: by key
        return [by_name[k] for k in keys]
    return list(outputs)  # a tuple, list or tensor: by position


def _exported_shapes(exported, max_batch_size):
    """(input shapes, output shapes) from the exported program's signature:
    symbolic dimensions -1, the batch dimension left out."""
    def shape_of(node, what):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{what}: the exported program has a {type(value).__name__} here, "
                             f"not a tensor; {_PYTHON_HINT}")
        dims = [d if isinstance(d, int) else -1 for d in value.shape]
        if max_batch_size > 0:
            if not dims:
                raise ValueError(f"{what}: has no batch dimension but max_batch_size is "
                                 f"{max_batch_size}")
            dims = dims[1:]
        return dims

    graph = exported.graph_module.graph
    user_inputs = set(exported.graph_signature.user_inputs)
    ins = [shape_of(n, f"inputs[{i}]") for i, n in
           enumerate(n for n in graph.nodes if n.op == "placeholder" and n.name in user_inputs)]
    out_node = next(n for n in graph.nodes if n.op == "output")
    user_outputs = exported.graph_signature.user_outputs
    outs = [shape_of(n, f"outputs[{i}]") for i, n in enumerate(
        n for n in out_node.args[0] if getattr(n, "name", None) in user_outputs)]
    return ins, outs


def _merge_exported(specs, shapes, field):
    """The specs with every dimension the exported program keeps symbolic as -1."""
    if len(specs) != len(shapes):
        raise ValueError(f"{field}: the exported program has {len(shapes)}, the signature "
                         f"{len(specs)}")
    merged = []
    for spec, shape in zip(specs, shapes):
        if len(spec["shape"]) != len(shape):
            raise ValueError(f"{field} {spec['name']!r}: rank {len(spec['shape'])}, the exported "
                             f"program's {len(shape)}")
        merged.append(dict(spec, shape=[-1 if s == -1 else d for d, s in zip(spec["shape"], shape)]))
    return merged


def compile_package(exported, pt2_path, inductor_configs=None):
    """Compiles `exported` with AOTInductor into the .pt2 package `pt2_path`.
    Returns the number of convolution weights aoti_prepack packed."""
    prepack = PrepackConvolutionWeights()
    configs = {**INDUCTOR_CONFIGS, "post_grad_custom_pre_pass": prepack,
               **(inductor_configs or {})}
    with torch.no_grad():  # Inductor freezes only without gradients
        torch._inductor.aoti_compile_and_package(exported, package_path=pt2_path,
                                                 inductor_configs=configs)
    return prepack.packed


def export(model, path, name=None, version=1, inputs=None, outputs=None, example_inputs=None,
           max_batch_size=0, batching=None, instance_count=0, device="cpu", description="",
           method=None, dynamic_dims=None, response_cache=False, more_example_inputs=None,
           load_check=True, inductor_configs=None):
    """Writes ``model`` (an nn.Module) to the archive ``path`` for platform
    "torch_aoti". The signature is found as in manypy.package.export
    (example_inputs, or synthetic ones from `inputs`), then taken from the
    exported program: a dimension it keeps symbolic is -1. inductor_configs
    adds to (or overrides) INDUCTOR_CONFIGS. load_check (default) loads the
    finished archive's .pt2 with AOTIModelPackageLoader, as the server does,
    and compares the examples' outputs (and one at max_batch_size) with the
    eager model's within RTOL/ATOL. Returns the manifest dict."""
    _load.check_torch()
    if device != "cpu":
        raise ValueError(f"device: {device!r}; manypy compiles AOTInductor archives for the CPU "
                         f"only (a CUDA package needs a CUDA libtorch to compile and serve)")
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    model = model.eval()
    name = default_name(name, path)
    if example_inputs is None:
        if inputs is None:
            raise ValueError("inputs: required unless example_inputs is given")
        example_inputs = example_inputs_for(inputs, max_batch_size)
    results = []
    inputs, outputs, streamed = resolve_signature(
        model, inputs, outputs, example_inputs, max_batch_size, method, more_example_inputs,
        dynamic_dims, results)
    if streamed:
        raise ValueError("streaming: only a Python model streams its responses")
    for field, specs in (("inputs", inputs), ("outputs", outputs)):
        for i, spec in enumerate(specs):
            if spec["datatype"] == "BYTES":
                raise ValueError(f"{field}[{i}].datatype: BYTES; the torch_aoti platform takes "
                                 f"tensors only (strings are Python objects: {_PYTHON_HINT})")
    outputs = _outputs_in_flat_order(outputs, results[0])
    args = as_args(example_inputs)
    exported = export_program(model, args, inputs, max_batch_size, method)
    in_shapes, out_shapes = _exported_shapes(exported, max_batch_size)
    inputs = _merge_exported(inputs, in_shapes, "inputs")
    outputs = _merge_exported(outputs, out_shapes, "outputs")
    manifest = _manifest.build_manifest(
        name, version, {"kind": "aoti", "package": AOTI_PACKAGE, "resource": AOTI_RESOURCE},
        inputs, outputs, max_batch_size=max_batch_size, batching=batching,
        instance_count=instance_count, device=device, description=description,
        platform=_manifest.AOTI_PLATFORM, response_cache=response_cache)
    work = tempfile.mkdtemp(prefix="manypy-aoti-")
    try:
        pt2 = os.path.join(work, "model.pt2")
        compile_package(exported, pt2, inductor_configs)
        with open(pt2, "rb") as f:
            data = f.read()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def write(exporter):
        exporter.save_text(_manifest.MANIFEST_PACKAGE, _manifest.MANIFEST_RESOURCE,
                           _manifest.dumps(manifest))
        exporter.save_binary(AOTI_PACKAGE, AOTI_RESOURCE, data)

    check = None
    if load_check:
        examples = [args] + [as_args(e) for e in (more_example_inputs or [])]
        eager = list(results)
        if max_batch_size > 1:  # what dynamic batching sends: a full batch
            full = tuple(_batch_of(a, max_batch_size) for a in args)
            examples.append(full)
            with torch.inference_mode():
                eager.append(_call(model, method, full))

        def check(tmp, file_uses):
            check_loads(tmp, manifest, examples, eager, display_path=os.path.abspath(path))

    write_archive(path, write, intern=None, extern=None, check=check)
    return manifest


def _call(model, method, args):
    return (getattr(model, method) if method else model)(*args)


def _batch_of(value, size):
    """`value` (batch first) with its rows repeated to a batch of `size`."""
    reps = -(-size // value.shape[0])
    return torch.cat([value] * reps, dim=0)[:size].clone()
