"""numpy arrays <-> Open Inference Protocol tensors (raw and typed contents).

Datatypes and the numpy dtypes they map to (little-endian on the wire):

    BOOL bool      UINT8 uint8   UINT16 uint16  UINT32 uint32  UINT64 uint64
    INT8 int8      INT16 int16   INT32 int32    INT64 int64
    FP16 float16   FP32 float32  FP64 float64
    BF16 uint16    (numpy has no bfloat16: the array holds the raw bfloat16
                    bit patterns; see float32_to_bf16 / bf16_to_float32)
    BYTES object   (an object array of `bytes`; str elements are sent UTF-8)
"""
import numpy as np

DATATYPES = ("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "BF16", "FP32", "FP64", "BYTES")

# The numpy dtype an array of each (fixed-width) datatype has on the wire.
NUMPY_DTYPES = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"), "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"), "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}

# The InferTensorContents field of each datatype (FP16 / BF16 have none).
TYPED_FIELDS = {
    "BOOL": "bool_contents",
    "INT8": "int_contents", "INT16": "int_contents", "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents", "UINT16": "uint_contents", "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


def float32_to_bf16(array):
    """float32 values -> uint16 bfloat16 bit patterns (round to nearest even)."""
    f = np.ascontiguousarray(array, dtype="<f4")
    bits = f.view("<u4").astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")
    nan = np.isnan(f)
    if nan.any():
        rounded = np.where(nan, np.uint16(0x7FC0), rounded).astype("<u2")
    return rounded


def bf16_to_float32(bits):
    """uint16 bfloat16 bit patterns -> float32 values (exact)."""
    b = np.ascontiguousarray(bits, dtype="<u2")
    return (b.astype("<u4") << 16).view("<f4")


def datatype_of(array):
    """The protocol datatype of a numpy array (BF16 must be named explicitly)."""
    kind = array.dtype
    if kind == np.bool_:
        return "BOOL"
    if kind.kind in "OSU":
        return "BYTES"
    for name in ("UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
                 "FP16", "FP32", "FP64"):
        if kind.newbyteorder("<") == NUMPY_DTYPES[name]:
            return name
    raise ValueError(f"numpy dtype {kind} has no Open Inference Protocol datatype")


def _to_bytes(x):
    if isinstance(x, bytes):
        return x
    if isinstance(x, (bytearray, memoryview)):
        return bytes(x)
    if isinstance(x, np.bytes_):
        return bytes(x)
    if isinstance(x, str):
        return x.encode("utf-8")
    return str(x).encode("utf-8")


def as_tensor(value, name=""):
    """(array, datatype) for one input: `value` is an array-like, or an
    (array-like, datatype) tuple that names the datatype explicitly."""
    datatype = None
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], str):
        value, datatype = value
        datatype = datatype.upper()
        if datatype not in NUMPY_DTYPES:
            raise ValueError(f"input '{name}': unknown datatype {datatype!r} "
                             f"(one of {', '.join(DATATYPES)})")
    if datatype == "BYTES" or (datatype is None and not isinstance(value, np.ndarray)
                               and _looks_like_bytes(value)):
        array = np.asarray(value, dtype=object)
        datatype = "BYTES"
    else:
        array = np.asarray(value)
        if datatype is None:
            datatype = datatype_of(array)
    if datatype == "BYTES":
        flat = [_to_bytes(x) for x in array.reshape(-1)]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(array.shape), datatype
    if datatype == "BF16":
        if array.dtype.kind == "f":
            return float32_to_bf16(array).reshape(array.shape), datatype
        return np.ascontiguousarray(array, dtype="<u2"), datatype
    return np.ascontiguousarray(array, dtype=NUMPY_DTYPES[datatype]), datatype


def _looks_like_bytes(value):
    first = value
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    return isinstance(first, (bytes, bytearray, str, np.bytes_, np.str_))


def to_raw(array, datatype):
    """The raw (little-endian, row-major) bytes of a tensor."""
    if datatype == "BYTES":
        parts = []
        for x in array.reshape(-1):
            b = _to_bytes(x)
            parts.append(len(b).to_bytes(4, "little"))
            parts.append(b)
        return b"".join(parts)
    return np.ascontiguousarray(array, dtype=NUMPY_DTYPES[datatype]).tobytes()


def fill_typed(contents, array, datatype, name=""):
    """Puts the tensor's elements into an InferTensorContents message."""
    field = TYPED_FIELDS.get(datatype)
    if field is None:
        raise ValueError(f"input '{name}': datatype {datatype} has no typed contents field in "
                         "the protocol; send it raw (binary=True)")
    flat = array.reshape(-1)
    if datatype == "BYTES":
        getattr(contents, field).extend(_to_bytes(x) for x in flat)
    else:
        getattr(contents, field).extend(flat.tolist())


def from_raw(raw, datatype, shape, name=""):
    """A numpy array from raw bytes (a writable copy)."""
    shape = tuple(int(d) for d in shape)
    if datatype == "BYTES":
        items, pos = [], 0
        while pos < len(raw):
            if pos + 4 > len(raw):
                raise ValueError(f"output '{name}': truncated BYTES element length")
            n = int.from_bytes(raw[pos:pos + 4], "little")
            pos += 4
            if pos + n > len(raw):
                raise ValueError(f"output '{name}': truncated BYTES element")
            items.append(bytes(raw[pos:pos + n]))
            pos += n
        out = np.empty(len(items), dtype=object)
        out[:] = items
        return out.reshape(shape)
    dtype = NUMPY_DTYPES.get(datatype)
    if dtype is None:
        raise ValueError(f"output '{name}': unknown datatype {datatype!r}")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def from_typed(contents, datatype, shape, name=""):
    """A numpy array from an InferTensorContents message."""
    shape = tuple(int(d) for d in shape)
    field = TYPED_FIELDS.get(datatype)
    if field is None:
        raise ValueError(f"output '{name}': datatype {datatype} has no typed contents field")
    values = getattr(contents, field)
    if datatype == "BYTES":
        out = np.empty(len(values), dtype=object)
        out[:] = [bytes(v) for v in values]
        return out.reshape(shape)
    return np.array(values, dtype=NUMPY_DTYPES[datatype]).reshape(shape)
