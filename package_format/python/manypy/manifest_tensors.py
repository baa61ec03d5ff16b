"""A manifest's tensor specs (its `inputs` and `outputs`): the forms a user
writes them in (a dict, a (name, datatype, shape) tuple, the CLI's
NAME:DTYPE:D1,D2) made into the stored dict, and the rules each spec and
list keeps (package_format/SCHEMA.md). Plain Python, no state: safe from any thread.
"""

import re

from .manifest_checks import check_keys, check_string, fail, is_int

# Open Inference Protocol datatype names, in the order SCHEMA.md lists them.
DATATYPES = (
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32",
    "INT64", "FP16", "BF16", "FP32", "FP64", "BYTES",
)

_TENSOR_NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_TENSOR_FIELDS = ("name", "datatype", "shape")


def tensor_spec(spec, field="tensor"):
    """Normalizes one tensor spec: a dict {"name","datatype","shape"} or a
    tuple (name, datatype, shape). Returns a new validated dict."""
    if isinstance(spec, dict):
        check_keys(spec, _TENSOR_FIELDS, field)
        missing = [k for k in _TENSOR_FIELDS if k not in spec]
        if missing:
            fail(f"{field}.{missing[0]}", "required field is missing")
        out = {"name": spec["name"], "datatype": spec["datatype"], "shape": spec["shape"]}
    elif isinstance(spec, (tuple, list)) and len(spec) == 3:
        out = {"name": spec[0], "datatype": spec[1], "shape": spec[2]}
    else:
        fail(field, f"must be a dict {{'name','datatype','shape'}} or a (name, datatype, shape) tuple, got {spec!r}")
    if isinstance(out["datatype"], str):
        out["datatype"] = out["datatype"].upper()
    if isinstance(out["shape"], tuple):
        out["shape"] = list(out["shape"])
    validate_tensor(out, field)
    return out


def tensor_specs(specs, field):
    """Normalizes a list of tensor specs (see tensor_spec)."""
    if specs is None or isinstance(specs, (str, bytes, dict)) or not hasattr(specs, "__iter__"):
        fail(field, f"must be a non-empty list of tensor specs, got {specs!r}")
    return [tensor_spec(s, f"{field}[{i}]") for i, s in enumerate(specs)]


def parse_tensor_arg(text, field="tensor"):
    """Parses the CLI form NAME:DTYPE:D1,D2,... (an empty dims part means a
    scalar: NAME:DTYPE:)."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3:
        fail(field, f"expected NAME:DTYPE:D1,D2,..., got {text!r}")
    name, dtype, dims = parts
    try:
        shape = [int(d) for d in dims.split(",")] if dims.strip() else []
    except ValueError:
        fail(f"{field}.shape", f"dimensions must be integers (-1 for variable), got {dims!r}")
    return tensor_spec({"name": name, "datatype": dtype, "shape": shape}, field)


def validate_tensor(spec, field):
    if not isinstance(spec, dict):
        fail(field, f"must be an object, got {type(spec).__name__}")
    check_keys(spec, _TENSOR_FIELDS, field)
    for key in _TENSOR_FIELDS:
        if key not in spec:
            fail(f"{field}.{key}", "required field is missing")
    check_string(spec["name"], f"{field}.name", _TENSOR_NAME_RE)
    datatype = spec["datatype"]
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        fail(f"{field}.datatype", f"unknown datatype {datatype!r} (expected one of {' '.join(DATATYPES)})")
    shape = spec["shape"]
    if not isinstance(shape, list):
        fail(f"{field}.shape", f"must be a list of integers, got {shape!r}")
    for j, dim in enumerate(shape):
        if not is_int(dim) or not (dim >= 1 or dim == -1):
            fail(f"{field}.shape", f"dimension {j} is {dim!r}; each must be >= 1 or -1 (variable)")


def validate_tensor_list(specs, field):
    if not isinstance(specs, list) or not specs:
        fail(field, "must be a non-empty list of {name, datatype, shape}")
    seen = set()
    for i, spec in enumerate(specs):
        validate_tensor(spec, f"{field}[{i}]")
        if spec["name"] in seen:
            fail(f"{field}[{i}].name", f"duplicate tensor name {spec['name']!r}")
        seen.add(spec["name"])
