"""The host's side of the model runtime, played outside the server: calls
the runtime (this package) with the arguments server/lifecycle/python_model.cc
gives it (the manifest's entry point, the archive's storages as tensors over
one mapping of the file, the device, the model's name). Used by
manypy.package.load_model() and by the load check's fresh process
(manypy/load_check_child.py), so that an archive that loads here loads in the
server. Not embedded in the server, which has its own host.

Imports only the standard library, torch and this package: the load check's
child imports it by name into a Python whose sys.path holds nothing of manypy.
"""

import json
import mmap
import os
import struct
import zipfile

import torch

import manypy_model_runtime as runtime
from manypy_model_runtime import calls as _calls

MANIFEST_ENTRY = "manypy/manifest.json"


def top_folder(names, path):
    """The one top-level folder every entry of an archive lies in (torch.package
    names it after the file); ValueError when there is not exactly one."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) != 1 or any("/" not in n for n in names):
        raise ValueError(f"{path}: entries are not all under one top-level folder")
    return tops.pop()


def read_manifest(path):
    """The archive's manifest as a dict (unvalidated: check_archive does that)."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        entry = f"{top_folder(names, path)}/{MANIFEST_ENTRY}"
        if entry not in names:
            raise ValueError(f"{path}: no {MANIFEST_ENTRY}")
        return json.loads(zf.read(entry))


def entry_point_value(manifest):
    """The entry point as python_model.cc's EntryPointValue passes it to
    the runtime's load: every field present, with the C++ parser's defaults
    (package_format/manifest.cc)."""
    ep = manifest["entry_point"]
    kind = ep["kind"]
    value = {"kind": kind, "package": "", "resource": "", "module": "", "function": "",
             "weights_package": "", "weights_resource": ""}
    if kind in ("pickle", "torchscript"):
        value["package"] = ep.get("package", "model")
        value["resource"] = ep.get("resource", "model.pt" if kind == "torchscript" else "model.pkl")
    else:
        value["module"] = ep.get("module", "")
        value["function"] = ep.get("function", "")
        weights = ep.get("weights") or {}
        value["weights_package"] = weights.get("package", "")
        value["weights_resource"] = weights.get("resource", "")
    return value


def map_storages(path):
    """{".data/<n>.storage": 1-D uint8 tensor} over one private mapping of the
    archive, as package_format/mapped_storages.h gives the server's
    interpreters (a private mapping: a model writing to its weights copies a
    page and never changes the file)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        mapping = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY) if size else None
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    top = top_folder([i.filename for i in infos], path)
    storages = {}
    for info in infos:
        rel = info.filename[len(top) + 1:]
        if not (rel.startswith(".data/") and rel.endswith(".storage")):
            continue
        if info.compress_type != zipfile.ZIP_STORED:
            raise ValueError(f"{path}: {rel} is compressed; storages must be stored")
        header = mapping[info.header_offset:info.header_offset + 30]
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        start = info.header_offset + 30 + name_len + extra_len
        storages[rel] = torch.frombuffer(mapping, dtype=torch.uint8, count=info.file_size,
                                         offset=start) if info.file_size else \
            torch.empty(0, dtype=torch.uint8)
    return storages


def load(path, device=None, source=None):
    """(model, manifest): the archive loaded by the server's runtime exactly
    as python_model.cc loads it (extern modules imported first, the entry
    point built over shared storages, eval mode, no gradients), on `device`
    (default: the manifest's). Reads `source` when given (the server reads
    its sealed copy of the archive), naming `path` in messages."""
    source = os.fspath(source or path)
    manifest = read_manifest(source)
    model = runtime.load(os.fspath(path), entry_point_value(manifest), map_storages(source),
                         device or manifest.get("device", "cpu"), source, manifest.get("name"))
    return model, manifest


def infer(model, manifest, inputs, device=None):
    """The outputs (a list in manifest order) of one call as the server makes
    it: runtime.infer with the manifest's method and output names; for a
    streaming model, its first response (then the stream is closed)."""
    args = (model, manifest.get("method", "forward"), [o["name"] for o in manifest["outputs"]],
            device or manifest.get("device", "cpu"), manifest.get("max_batch_size", 0) > 0,
            list(inputs))
    if not manifest.get("streaming"):
        return runtime.infer(*args)
    stream = runtime.start_stream(*args)
    try:
        return stream.next()
    finally:
        stream.close()


def warmup(model, manifest, device=None):
    """The server's warm-up (warmup.cc WarmUp, one run): a call on
    warmup_inputs, and for a torch.compile'd model that batches a second
    with a batch of 2, which compiles its batch dimension dynamic."""
    infer(model, manifest, warmup_inputs(manifest), device)
    if (runtime.is_compiled(model) and manifest.get("max_batch_size", 0) >= 2 and
            not manifest.get("streaming")):
        infer(model, manifest, warmup_inputs(manifest, 2), device)


def set_serving_api(module):
    """Makes `module` the runtime's `manypy` where no server is (the load
    check gives it manypy.serving: a model's nested calls raise its
    InferenceError)."""
    _calls.api_override = module


# The server's warm-up inputs (server/lifecycle/warmup.cc SignatureInputs):
# zeros, variable dimensions 1 and the batch dimension `batch`, BYTES b"manypy",
# unsigned types widened as torch 1.13 has no uint16/32/64
# (server/inference/datatypes.cc).
_WARMUP_DTYPES = {
    "BOOL": torch.bool, "UINT8": torch.uint8, "UINT16": torch.int32, "UINT32": torch.int64,
    "UINT64": torch.int64, "INT8": torch.int8, "INT16": torch.int16, "INT32": torch.int32,
    "INT64": torch.int64, "FP16": torch.float16, "BF16": torch.bfloat16, "FP32": torch.float32,
    "FP64": torch.float64,
}


def warmup_inputs(manifest, batch=1):
    """The inputs the server warms a freshly loaded model up with."""
    inputs = []
    for spec in manifest["inputs"]:
        shape = ([batch] if manifest.get("max_batch_size", 0) > 0 else []) + \
            [1 if d < 0 else d for d in spec["shape"]]
        if spec["datatype"] == "BYTES":
            value = b"manypy"
            for d in reversed(shape):
                value = [value for _ in range(d)]
            inputs.append(value)
        else:
            inputs.append(torch.zeros(shape, dtype=_WARMUP_DTYPES[spec["datatype"]]))
    return inputs
