"""The datatype and shape of one input or output value, as a manifest
declares them: a torch dtype's datatype name, a value's (datatype, shape),
the batch dimension, a declared spec checked against a value, a model's
result split into outputs, and synthetic inputs for a signature."""

import re

import torch

from . import manifest as _manifest

_DTYPE_TO_DATATYPE = {
    torch.bool: "BOOL", torch.uint8: "UINT8", torch.int8: "INT8",
    torch.int16: "INT16", torch.int32: "INT32", torch.int64: "INT64",
    torch.float16: "FP16", torch.bfloat16: "BF16", torch.float32: "FP32",
    torch.float64: "FP64",
}
for _name, _dt in (("uint16", "UINT16"), ("uint32", "UINT32"), ("uint64", "UINT64")):
    if hasattr(torch, _name):  # torch >= 2.3 only
        _DTYPE_TO_DATATYPE[getattr(torch, _name)] = _dt
_DATATYPE_TO_DTYPE = {v: k for k, v in _DTYPE_TO_DATATYPE.items()}


def datatype_of(dtype):
    """The Open Inference Protocol datatype name of a torch dtype."""
    try:
        return _DTYPE_TO_DATATYPE[dtype]
    except KeyError:
        raise ValueError(f"torch dtype {dtype} has no manypy datatype") from None


def _is_bytes_leaf(x):
    return isinstance(x, (bytes, bytearray, str))


def _nested_bytes_shape(value):
    """The shape of a (nested) list of bytes/str, or None if it is not one."""
    if _is_bytes_leaf(value):
        return []
    if not isinstance(value, list):
        return None
    if not value:
        return [0]
    shapes = [_nested_bytes_shape(v) for v in value]
    if any(s is None for s in shapes) or any(s != shapes[0] for s in shapes):
        return None
    return [len(value)] + shapes[0]


def value_spec(value, field):
    """(datatype, shape) of one input or output value."""
    if isinstance(value, torch.Tensor):
        return datatype_of(value.dtype), list(value.shape)
    shape = _nested_bytes_shape(value)
    if shape is None:
        raise ValueError(f"{field}: expected a torch.Tensor or a (nested, rectangular) list "
                         f"of bytes/str, got {type(value).__name__}")
    return "BYTES", shape


def _shape_matches(declared, actual):
    return len(declared) == len(actual) and all(d == -1 or d == a for d, a in zip(declared, actual))


def strip_batch(shape, max_batch_size, batch, field):
    if max_batch_size <= 0:
        return shape
    if not shape:
        raise ValueError(f"{field}: has no batch dimension but max_batch_size is {max_batch_size}")
    if batch is not None and shape[0] != batch:
        raise ValueError(f"{field}: batch dimension is {shape[0]}, the example batch is {batch}")
    if shape[0] > max_batch_size:
        raise ValueError(f"{field}: batch dimension {shape[0]} exceeds max_batch_size {max_batch_size}")
    return shape[1:]


_INDEX_SUFFIX = re.compile(r"__([0-9]+)$")


def output_index(name):
    """The position a tuple/list output named NAME__<index> takes from the
    model's result (Triton's PyTorch-backend naming convention), or None."""
    m = _INDEX_SUFFIX.search(name)
    return int(m.group(1)) if m else None



def split_outputs(result, declared):
    """[(name or None, value)] from what the model returned: a dict's items,
    a tuple's or list's elements, or the result itself. A list or tuple
    holding exactly one dict (torchvision's detectors, one image per call) is
    that dict. Values may be None (left out of the signature)."""
    if isinstance(result, (tuple, list)) and len(result) == 1 and isinstance(result[0], dict):
        result = result[0]
    if isinstance(result, dict):
        return [(k, v) for k, v in result.items()]
    if isinstance(result, tuple):
        return [(None, v) for v in result]
    if isinstance(result, list):
        single_bytes = _nested_bytes_shape(result) is not None
        if declared is not None:
            single_bytes = single_bytes and len(declared) == 1 and declared[0]["datatype"] == "BYTES"
        if not single_bytes:
            return [(None, v) for v in result]
    return [(None, result)]


def as_args(example_inputs):
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs)
    return (example_inputs,)


def check_declared(field, spec, datatype, shape, datatype_source, shape_source):
    """Raises ValueError naming `field` when a declared tensor spec disagrees
    with what an example run produced."""
    if spec["datatype"] != datatype:
        raise ValueError(f"{field}.datatype: declared {spec['datatype']}, "
                         f"{datatype_source} {datatype}")
    if not _shape_matches(spec["shape"], shape):
        raise ValueError(f"{field}.shape: declared {spec['shape']}, {shape_source} "
                         f"{shape} (batch dimension excluded)")


def example_inputs_for(inputs, max_batch_size=0, batch_size=1, seed=0):
    """Synthetic positional inputs for a signature: random floats, zeros for
    integers and BOOL, b"example" for BYTES; -1 dimensions become 1 and a
    batch dimension of batch_size leads when max_batch_size > 0."""
    gen = torch.Generator().manual_seed(seed)
    args = []
    for i, spec in enumerate(_manifest.tensor_specs(inputs, "inputs")):
        shape = [1 if d == -1 else d for d in spec["shape"]]
        if max_batch_size > 0:
            shape = [batch_size] + shape
        if spec["datatype"] == "BYTES":
            value = b"example"
            for d in reversed(shape):
                value = [value for _ in range(d)]
            args.append(value)
            continue
        dtype = _DATATYPE_TO_DTYPE.get(spec["datatype"])
        if dtype is None:
            raise ValueError(f"inputs[{i}].datatype: {spec['datatype']} has no torch dtype here")
        if dtype.is_floating_point:
            args.append(torch.randn(shape, generator=gen).to(dtype))
        else:
            args.append(torch.zeros(shape, dtype=dtype))
    return tuple(args)
