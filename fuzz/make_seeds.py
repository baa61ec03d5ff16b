#!/usr/bin/python3
"""Writes the fuzz targets' seed corpora (fuzz/<target>/seeds/), committed with the sources.

Each seed is a real, valid input of its kind, so fuzzing starts deep inside the decoders:
ModelInferRequests of every datatype with raw and typed contents, HTTP bodies with JSON data
and with binary data behind Inference-Header-Content-Length, valid manifests, and small valid
model archives (stored, deflated, ZIP64, 64-byte aligned storages), generate bodies, and the
repository and shared-memory bodies. Then the deep cases, files named deep_* and depth_*:
every JSON target gets bodies nested 10,000 levels (arrays, objects, never closed, and inside
the fields it reads) and at the limit of 100 levels and one past it; the gRPC target gets
groups nested 10,000 levels (at the top, inside an input, inside a parameter) and at
protobuf's limit and one past it.

    /usr/bin/python3 fuzz/make_seeds.py --proto-python build/python

--proto-python is a folder holding the manypy_proto package that the main build generates.
"""
import argparse
import io
import json
import pathlib
import re
import struct
import sys
import zipfile

from deep_seeds import (DEEP, arrays, deep_json_seeds, http_deep_seeds, infer_request_deep_seeds,
                        openai_deep_seeds, write)

HERE = pathlib.Path(__file__).resolve().parent

# name -> (struct format, typed contents field or None, sample values)
DATATYPES = {
    "BOOL": ("?", "bool_contents", [True, False, True, True, False, False]),
    "UINT8": ("B", "uint_contents", [0, 1, 2, 127, 200, 255]),
    "UINT16": ("H", "uint_contents", [0, 1, 300, 65535, 7, 8]),
    "UINT32": ("I", "uint_contents", [0, 1, 70000, 4294967295, 7, 8]),
    "UINT64": ("Q", "uint64_contents", [0, 1, 2**40, 2**63 - 1, 7, 8]),
    "INT8": ("b", "int_contents", [-128, -1, 0, 1, 127, 5]),
    "INT16": ("h", "int_contents", [-32768, -1, 0, 1, 32767, 5]),
    "INT32": ("i", "int_contents", [-2**31, -1, 0, 1, 2**31 - 1, 5]),
    "INT64": ("q", "int64_contents", [-2**63, -1, 0, 1, 2**63 - 1, 5]),
    "FP16": ("e", None, [0.0, -1.5, 2.0, 65504.0, 0.5, 3.25]),
    "BF16": (None, None, [0.0, -1.5, 2.0, 1e30, 0.5, 3.25]),
    "FP32": ("f", "fp32_contents", [0.0, -1.5, 2.0, 3.4e38, float("inf"), 1e-40]),
    "FP64": ("d", "fp64_contents", [0.0, -1.5, 2.0, 1e300, float("-inf"), 5e-324]),
}


def raw_bytes(datatype, values):
    fmt = DATATYPES[datatype][0]
    if datatype == "BF16":  # the upper half of the float32
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    return struct.pack("<%d%s" % (len(values), fmt), *values)


def bytes_raw(items):
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def infer_request_seeds(pb, out):
    def request(model="fuzz"):
        r = pb.ModelInferRequest(model_name=model, model_version="1", id="seed")
        return r

    for dt, (_, field, values) in DATATYPES.items():
        r = request()
        r.inputs.add(name="INPUT0", datatype=dt, shape=[2, 3])
        r.raw_input_contents.append(raw_bytes(dt, values))
        write(out, "raw_%s.pb" % dt, r.SerializeToString())
        if field:
            r = request()
            t = r.inputs.add(name="INPUT0", datatype=dt, shape=[2, 3])
            getattr(t.contents, field).extend(values)
            write(out, "typed_%s.pb" % dt, r.SerializeToString())
    items = [b"hello", b"", b"\x00\xff bytes"]
    r = request()
    r.inputs.add(name="TEXT", datatype="BYTES", shape=[3])
    r.raw_input_contents.append(bytes_raw(items))
    write(out, "raw_BYTES.pb", r.SerializeToString())
    r = request()
    t = r.inputs.add(name="TEXT", datatype="BYTES", shape=[1, 3])
    t.contents.bytes_contents.extend(items)
    write(out, "typed_BYTES.pb", r.SerializeToString())
    # Two inputs, a requested output, parameters; and a batched model (name starting 'b').
    r = request()
    r.inputs.add(name="a", datatype="INT64", shape=[4]).contents.int64_contents.extend([1, 2, 3, 4])
    r.inputs.add(name="b", datatype="FP32", shape=[2, 2]).contents.fp32_contents.extend([1, 2, 3, 4])
    r.outputs.add(name="OUTPUT0")
    r.parameters["priority"].int64_param = 1
    write(out, "two_inputs_typed.pb", r.SerializeToString())
    r = request("batch")
    r.inputs.add(name="x", datatype="FP32", shape=[3, 2])
    r.inputs.add(name="y", datatype="UINT8", shape=[3, 4])
    r.raw_input_contents.append(raw_bytes("FP32", [1.0] * 6))
    r.raw_input_contents.append(bytes(range(12)))
    write(out, "batched_raw.pb", r.SerializeToString())
    r = request("batch")
    r.inputs.add(name="s", datatype="BYTES", shape=[2, 1]).contents.bytes_contents.extend([b"a", b"b"])
    write(out, "batched_BYTES.pb", r.SerializeToString())


def http_seed(body, binary=b""):
    """The fuzz input: the Inference-Header-Content-Length line, then the body."""
    text = json.dumps(body, separators=(",", ":")).encode()
    header = str(len(text)).encode() if binary else b""
    return header + b"\n" + text + binary


def http_infer_seeds(out):
    for dt, (_, _, values) in DATATYPES.items():
        nested = [values[:3], values[3:]]
        data = nested if dt not in ("FP32", "FP64") else [0.0, -1.5, 2.0, 3.0, 4.5, 1e-3]
        write(out, "json_%s.bin" % dt, http_seed(
            {"id": "seed", "inputs": [{"name": "INPUT0", "datatype": dt, "shape": [2, 3],
                                       "data": data}]}))
        raw = raw_bytes(dt, values)
        write(out, "binary_%s.bin" % dt, http_seed(
            {"inputs": [{"name": "INPUT0", "datatype": dt, "shape": [2, 3],
                         "parameters": {"binary_data_size": len(raw)}}],
             "outputs": [{"name": "OUTPUT0", "parameters": {"binary_data": True}}]}, raw))
    write(out, "json_BYTES.bin", http_seed(
        {"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [2], "data": ["hi", ""]}],
         "parameters": {"binary_data_output": True}}))
    items = bytes_raw([b"hello", b"\x00\xff"])
    write(out, "binary_BYTES.bin", http_seed(
        {"inputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [2],
                     "parameters": {"binary_data_size": len(items)}}]}, items))
    # JSON and binary inputs mixed, a timeout, outputs as JSON and binary; a batched model.
    raw = raw_bytes("FP32", [1.0, 2.0, 3.0, 4.0])
    write(out, "mixed.bin", http_seed(
        {"id": "m", "parameters": {"timeout": 1000000, "binary_data_output": False},
         "inputs": [{"name": "a", "datatype": "INT32", "shape": [2], "data": [1, 2]},
                    {"name": "b", "datatype": "FP32", "shape": [2, 2],
                     "parameters": {"binary_data_size": len(raw)}}],
         "outputs": [{"name": "OUTPUT0"}, {"name": "b", "parameters": {"binary_data": False}}]},
        raw))
    write(out, "batched.bin", b"\n" + json.dumps(
        {"inputs": [{"name": "x", "datatype": "INT16", "shape": [2, 2], "data": [[1, 2], [3, 4]]}]}
    ).encode())


MANIFEST = {
    "schema_version": 1, "name": "resnet18", "version": 1, "platform": "manypy_python",
    "entry_point": {"kind": "pickle", "package": "model", "resource": "model.pkl"},
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, 224, 224]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [1000]}],
    "max_batch_size": 8,
    "batching": {"dynamic": True, "preferred_batch_sizes": [4, 8],
                 "max_queue_delay_microseconds": 500},
    "instance_count": 0, "device": "cpu", "description": "torchvision resnet18, random weights",
}


def manifests():
    yield "schema_example.json", MANIFEST
    yield "minimal.json", {
        "schema_version": 1, "name": "m", "version": 1, "platform": "manypy_python",
        "entry_point": {"kind": "pickle"},
        "inputs": [{"name": "x", "datatype": "BYTES", "shape": [-1]}],
        "outputs": [{"name": "y", "datatype": "INT64", "shape": []}]}
    yield "factory_weights.json", {
        "schema_version": 1, "name": "two_io", "version": 3, "platform": "manypy_python",
        "entry_point": {"kind": "factory", "module": "models.two_io", "function": "build",
                        "weights": {"package": "manypy", "resource": "weights.pkl"}},
        "method": "predict",
        "inputs": [{"name": "a", "datatype": dt, "shape": [2, -1]} for dt in ["INT64"]] +
                  [{"name": "b", "datatype": "FP16", "shape": [4]}],
        "outputs": [{"name": "sum", "datatype": "FP32", "shape": [-1]}],
        "max_queue_size": 16, "max_execution_seconds": 5,
        "default_timeout_microseconds": 250000, "device": "cuda:0"}
    yield "torchscript.json", {
        "schema_version": 1, "name": "ts.model-1", "version": 2, "platform": "torchscript",
        "entry_point": {"kind": "torchscript", "package": "model", "resource": "model.pt"},
        "inputs": [{"name": "INPUT:0", "datatype": "FP32", "shape": [3]}],
        "outputs": [{"name": "OUTPUT:0", "datatype": "FP32", "shape": [3]}],
        "max_batch_size": 65536, "batching": {"dynamic": False}, "instance_count": 2,
        "device": "cuda"}
    yield "every_datatype.json", {
        "schema_version": 1, "name": "all_types", "version": 1, "platform": "manypy_python",
        "entry_point": {"kind": "pickle", "package": "a.b", "resource": "c/d.pkl"},
        "inputs": [{"name": "in_" + dt, "datatype": dt, "shape": [1, -1]}
                   for dt in list(DATATYPES) + ["BYTES"]],
        "outputs": [{"name": "out_" + dt, "datatype": dt, "shape": [-1]}
                    for dt in list(DATATYPES) + ["BYTES"]]}


def aligned_zip(entries, root="model", compress=(), zip64=()):
    """A zip laid out as torch.package writes one: every entry under `root`/, .data storages
    stored and 64-byte aligned (padding in an extra field, as PyTorch's writer does)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in entries:
            info = zipfile.ZipInfo(root + "/" + name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED if name in compress else zipfile.ZIP_STORED
            if name.endswith(".storage"):
                # Python's writer appends a 20-byte ZIP64 extra field to a ZIP64 local header.
                start = buffer.tell() + 30 + len(info.filename.encode()) + 20 * (name in zip64)
                pad = (-(start + 4)) % 64
                info.extra = struct.pack("<HH", 0x4246, pad) + b"\0" * pad  # "FB", as torch
            with z.open(info, "w", force_zip64=name in zip64) as f:
                f.write(data)
    return buffer.getvalue()


def archive_seeds(out):
    def manifest(**changes):
        m = dict(MANIFEST, name="tiny", max_batch_size=0)
        m.pop("batching")
        m.update(changes)
        return json.dumps(m, indent=1).encode()

    storage = struct.pack("<16f", *range(16))
    common = [(".data/version", b"3\n"), (".data/extern_modules", b"torch\n"),
              (".data/0.storage", storage)]
    write(out, "pickle.mpk", aligned_zip(
        [("manypy/manifest.json", manifest()), ("model/model.pkl", b"\x80\x02}q\x00.")] + common))
    write(out, "deflated.mpk", aligned_zip(
        [("manypy/manifest.json", manifest()), ("model/model.pkl", b"pickle " * 40)] + common,
        compress={"manypy/manifest.json", "model/model.pkl"}))
    write(out, "factory.mpk", aligned_zip(
        [("manypy/manifest.json", manifest(entry_point={
            "kind": "factory", "module": "net.build", "function": "make",
            "weights": {"package": "manypy", "resource": "weights.pkl"}})),
         ("net/build.py", b"def make():\n    return None\n"), ("manypy/weights.pkl", b"w")]
        + common, root="factory"))
    write(out, "torchscript_zip64.mpk", aligned_zip(
        [("manypy/manifest.json", manifest(platform="torchscript", entry_point={
            "kind": "torchscript"})), ("model/model.pt", b"ts"), (".data/1.storage", storage)],
        root="ts", zip64={"model/model.pt", ".data/1.storage"}))
    # Directory entries, as some zip tools write them.
    write(out, "directories.mpk", aligned_zip(
        [("", b""), ("model/", b""), ("manypy/manifest.json", manifest()),
         ("model/model.pkl", b"p")], root="dirs"))


def openai_request_seeds(out):
    """A selector byte (route = byte % 3: completions, chat, embeddings; 4: a batching
    model; 8: MAX_TOKENS INT32), then a request body as the OpenAI clients send it."""
    bodies = {
        "completion": (0, {"model": "generator", "prompt": "Once upon", "max_tokens": 8,
                           "temperature": 0.7, "top_p": 0.9, "stop": ["\n", "."], "seed": 3}),
        "completion_stream": (4, {"model": "generator", "prompt": ["Hi"], "stream": True,
                                  "stream_options": {"include_usage": True}, "n": 1}),
        "chat": (1, {"model": "generator", "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}],
            "max_completion_tokens": 16, "logprobs": False, "tools": []}),
        "chat_int32": (9, {"model": "generator", "messages": [{"role": "user", "content": "x"}],
                           "max_tokens": 2**40, "stop": "!", "seed": -5}),
        "embeddings": (2, {"model": "generator", "input": ["a", "bc"],
                           "encoding_format": "base64", "dimensions": 4}),
        "embeddings_one": (6, {"model": "generator", "input": "text", "user": "u"}),
    }
    for name, (selector, body) in bodies.items():
        write(out, name + ".bin", bytes([selector]) + json.dumps(body).encode())


def generate_request_seeds(out):
    """A selector byte (bit 1: the LLM-like model, else one input of every datatype; bit 0:
    a batching model), then a generate body."""
    llm = {"text_input": "Once upon", "max_tokens": 8, "bad_words": ["a", "b"], "stream": False,
           "temperature": 0.5, "id": "g", "parameters": {"timeout": 1000000, "priority": 1}}
    every = {"mask": [True, False], "image": [[[1, 2, 3], [4, 5, 6]]], "ushort": [[1, 2], [3, 4]],
             "uint": [4294967295], "seed": 18446744073709551615, "small": [-128, 127],
             "short": [[-1, 2]], "max_tokens": 2147483647, "ids": [[1, 2, 3], [4, 5, 6]],
             "half": [1.5, -2.0], "bhalf": [1e30, 0.5], "temperature": 3.4e38,
             "top_p": [1e300, -0.0], "text_input": ["x", "\u00e9"]}
    bodies = {"llm": (2, llm), "llm_batched": (3, {"text_input": [["hi"]], "max_tokens": [[4]]}),
              "every_type": (0, every), "every_type_batched": (1, {"ids": [[[1]], [[2]]]}),
              "ragged": (0, {"ids": [[1, 2], [3]]}), "many_ids": (0, {"ids": [list(range(2000))]}),
              "unknown_field": (2, {"text": "x"})}
    for name, (selector, body) in bodies.items():
        write(out, name + ".bin", bytes([selector]) + json.dumps(body).encode())
    deep_json_seeds(out, lambda b: b"\x02" + b, {
        "text_input": (1, lambda v: '{"text_input":%s}' % v),
        "parameters": (2, lambda v: '{"text_input":"x","parameters":{"p":%s}}' % v),
    })
    deep_json_seeds(out, lambda b: b"\x00" + b, {"ids": (1, lambda v: '{"ids":%s}' % v)},
                    whole=False)


def json_bodies_seeds(out):
    """A selector byte (mod 4: repository index, repository load, system and CUDA shared-memory
    register), then the body."""
    bodies = {
        "index_ready": (0, b'{"ready":true}'), "index_all": (0, b'{"ready":false}'),
        "index_empty": (0, b""),
        "load": (1, b'{"parameters":{"config":"{}","file:1/model.mpk":"UEsDBA=="}}'),
        "load_empty": (1, b""),
        "system_register": (2, b'{"key":"/shm","offset":0,"byte_size":64}'),
        "system_register_big": (2, b'{"key":"/shm","offset":18446744073709551615,'
                                   b'"byte_size":18446744073709551615}'),
        "cuda_register": (3, b'{"raw_handle":{"b64":"AAAA"},"device_id":0,"byte_size":64}'),
    }
    for name, (selector, body) in bodies.items():
        write(out, name + ".bin", bytes([selector]) + body)
    for selector, route in enumerate(["index", "load", "system", "cuda"]):
        wrap = lambda b, s=selector: bytes([s]) + b
        write(out, "deep_arrays_%s.bin" % route, wrap(arrays(DEEP, "").encode()))
        write(out, "deep_unclosed_%s.bin" % route, wrap(("{" + '"a":[' * DEEP).encode()))
    deep_json_seeds(out, lambda b: b"\x01" + b, {
        "load_parameters": (2, lambda v: '{"parameters":{"p":%s}}' % v),
    }, whole=False)
    deep_json_seeds(out, lambda b: b"\x02" + b, {
        "register_key": (1, lambda v: '{"key":%s,"byte_size":1}' % v),
    }, whole=False)


def manifest_deep_seeds(out):
    def manifest(v):
        m = json.dumps(dict(MANIFEST, description="@"), separators=(",", ":"))
        return m.replace('"@"', v)
    deep_json_seeds(out, lambda b: b, {
        "description": (1, manifest),
        "inputs": (1, lambda v: manifest("1").replace('"inputs":', '"inputs":%s,"x":' % v, 1)),
    }, suffix=".json")


def drop_written_seeds(folder):
    """Removes the seeds this script writes from `folder`, keeping the corpus entries
    a fuzz run added and someone committed (libFuzzer names them by their SHA-1: 40
    hex digits), which nothing here could write again."""
    if not folder.is_dir():
        return
    for f in folder.iterdir():
        if not re.fullmatch(r"[0-9a-f]{40}", f.name):
            f.unlink()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto-python", required=True,
                        help="folder holding the generated manypy_proto package (build/python)")
    args = parser.parse_args()
    sys.path.insert(0, args.proto_python)
    from manypy_proto import grpc_service_pb2 as pb

    targets = ("infer_request", "http_infer", "manifest", "archive", "openai_request",
               "generate_request", "json_bodies")
    for target in targets:  # rewritten, so a dropped seed does not linger
        drop_written_seeds(HERE / target / "seeds")
    infer_request_seeds(pb, HERE / "infer_request" / "seeds")
    infer_request_deep_seeds(pb, HERE / "infer_request" / "seeds")
    http_infer_seeds(HERE / "http_infer" / "seeds")
    http_deep_seeds(HERE / "http_infer" / "seeds")
    for name, m in manifests():
        write(HERE / "manifest" / "seeds", name, json.dumps(m, indent=1).encode())
    manifest_deep_seeds(HERE / "manifest" / "seeds")
    archive_seeds(HERE / "archive" / "seeds")
    openai_request_seeds(HERE / "openai_request" / "seeds")
    openai_deep_seeds(HERE / "openai_request" / "seeds")
    generate_request_seeds(HERE / "generate_request" / "seeds")
    json_bodies_seeds(HERE / "json_bodies" / "seeds")
    for target in targets:
        files = list((HERE / target / "seeds").iterdir())
        print("%s: %d seeds, %d bytes" % (target, len(files), sum(f.stat().st_size for f in files)))


if __name__ == "__main__":
    main()
