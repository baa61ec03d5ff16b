"""Prepacking convolution weights for oneDNN when the batch dimension is
dynamic: an Inductor post-grad pass that manypy.aoti adds to the
AOTInductor compile.

Why: under freezing, Inductor reorders each convolution's weight once, at
compile time, into the blocked layout oneDNN's kernels read -- but only when
the convolution's input shape is static (PyTorch 2.6
torch/_inductor/fx_passes/mkldnn_fusion.py, _register_weight_pack_pass:
"For dynamic shape case, we need to pack weight in runtime"). An archive's
batch dimension is dynamic (dynamic batching joins requests along it), so
every call reordered every weight: resnet18 compiled ran at 1.2-1.3x eager
where a static batch ran at 1.5-1.7x, and resnet50 at 1.01x.

What it does: after freezing, each convolution Inductor left with a plain
weight (mkldnn._convolution_pointwise on a frozen constant) gets the weight
reordered here, once, for the input's shape with each symbolic dimension at
its size hint (the traced example's, as Inductor does for bf16 weights with
dynamic shapes), and the plain weight is dropped from the graph, so the
compiled shared object holds one copy of the weights, not two. oneDNN's
fp32 blocked weight layout depends on the channels, kernel and CPU, not on
the batch; a call whose shape asked for another layout would still be
right (oneDNN reorders a weight whose layout differs, as before).
"""

import hashlib

import torch

try:  # PyTorch >= 2.6 (manypy.aoti refuses older releases before compiling)
    from torch._inductor.custom_graph_pass import CustomGraphPass
except ImportError:  # pragma: no cover - 1.13: nothing here runs
    CustomGraphPass = object


def _size_hint(dim):
    """An int for a static dimension, the SymInt's hint for a symbolic one, or None."""
    if isinstance(dim, int):
        return dim
    hint = getattr(dim.node, "hint", None)
    return int(hint) if hint is not None else None


class PrepackConvolutionWeights(CustomGraphPass):
    """Inductor's post_grad_custom_pre_pass (runs on the frozen graph, before
    Inductor's own post-grad fusions). The number of weights it packed is in
    `packed` after a compile."""

    def __init__(self):
        self.packed = 0

    def __call__(self, graph):
        gm = graph.owning_module
        if gm is None or not torch.backends.mkldnn.is_available():
            return
        conv = torch.ops.mkldnn._convolution_pointwise.default
        for node in list(graph.nodes):
            if node.op != "call_function" or node.target is not conv:
                continue
            x, w = node.args[0], node.args[1]
            if w.op != "get_attr" or "val" not in x.meta:
                continue
            weight = getattr(gm, w.target, None)
            if not isinstance(weight, torch.Tensor) or weight.is_mkldnn or weight.dim() != 4 \
                    or weight.dtype != torch.float32:
                continue  # packed already (a static shape), or not a case Inductor packs
            sizes = [_size_hint(d) for d in x.meta["val"].shape]
            if any(s is None for s in sizes):
                continue
            padding, stride, dilation, groups = node.args[3:7]
            packed = torch.ops.mkldnn._reorder_convolution_weight(
                weight, padding, stride, dilation, groups, sizes)
            name = self._free_name(gm)
            gm.register_buffer(name, packed)
            with graph.inserting_before(node):
                packed_node = graph.create_node("get_attr", name, (), {})
            packed_node.meta.update(w.meta)  # as Inductor's own constant folding does
            node.replace_input_with(w, packed_node)
            if not w.users:  # drop the plain copy: the .so would embed both
                graph.erase_node(w)
                _delete_attr(gm, w.target)
            self.packed += 1

    @staticmethod
    def _free_name(gm):
        i = 0
        while hasattr(gm, f"_manypy_packed_conv_weight{i}"):
            i += 1
        return f"_manypy_packed_conv_weight{i}"

    def uuid(self):
        # Inductor's FX graph cache keys on it: this file's text.
        with open(__file__, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()


def _delete_attr(gm, target):
    """Removes the attribute `target` (dotted) from `gm`, buffer or parameter."""
    *path, leaf = target.split(".")
    owner = gm
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return
    for table in ("_buffers", "_parameters"):
        getattr(owner, table, {}).pop(leaf, None)
    if hasattr(owner, leaf):
        delattr(owner, leaf)
