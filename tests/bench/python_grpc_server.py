#!/usr/bin/python3
"""Baseline servers for `make bench`: what users run instead of manypy.

    python_grpc_server.py ARCHIVE --port P                  # python-grpc
    python_grpc_server.py ARCHIVE --port P --processes N    # python-processes

python-grpc is the first thing users write: a grpcio server with a thread
pool in one Python process, the model loaded once with torch.package, every
request under the one GIL. python-processes is the TorchServe / Triton
Python-backend pattern: N worker processes, each with its own copy of the
model and its own grpcio server, sharing one port through SO_REUSEPORT (the
kernel spreads connections over them). Both speak the same Open Inference
Protocol subset manypy-perf uses (ServerLive/Ready, ModelMetadata,
ModelConfig, ModelInfer with raw contents) and print
"listening on 127.0.0.1:PORT" when every worker is ready.
"""
import argparse
import json
import os
import signal
import sys
import zipfile
from concurrent import futures

import numpy as np
import torch
from torch.package import PackageImporter

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "clients", "python"), os.path.join(REPO, "package_format", "python")]

import grpc  # noqa: E402
from manypy.client._proto import grpc_service_pb2 as pb, grpc_service_pb2_grpc as pb_grpc  # noqa: E402
from manypy.client._proto import model_config_pb2 as config_pb  # noqa: E402

NUMPY = {"BOOL": np.bool_, "UINT8": np.uint8, "INT8": np.int8, "INT16": np.int16,
         "INT32": np.int32, "INT64": np.int64, "FP16": np.float16, "FP32": np.float32,
         "FP64": np.float64}


def read_manifest(archive):
    with zipfile.ZipFile(archive) as z:
        name = next(n for n in z.namelist() if n.endswith("manypy/manifest.json"))
        return json.loads(z.read(name))


def load_model(archive, manifest):
    importer = PackageImporter(archive)
    entry = manifest["entry_point"]
    if entry["kind"] != "pickle":
        raise SystemExit("the baseline loads pickle entry points only")
    model = importer.load_pickle(entry.get("package", "model"), entry.get("resource", "model.pkl"))
    return model.eval() if isinstance(model, torch.nn.Module) else model


def decode_bytes(raw):
    items, pos = [], 0
    while pos < len(raw):
        n = int.from_bytes(raw[pos:pos + 4], "little")
        items.append(raw[pos + 4:pos + 4 + n])
        pos += 4 + n
    return items


class Servicer(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, archive):
        self.manifest = read_manifest(archive)
        self.model = load_model(archive, self.manifest)

    def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=True)

    def ModelReady(self, request, context):
        return pb.ModelReadyResponse(ready=request.name == self.manifest["name"])

    def _shape(self, spec):
        return ([-1] if self.manifest.get("max_batch_size", 0) > 0 else []) + spec["shape"]

    def ModelMetadata(self, request, context):
        m = self.manifest
        out = pb.ModelMetadataResponse(name=m["name"], versions=[str(m["version"])], platform="python")
        for spec in m["inputs"]:
            out.inputs.add(name=spec["name"], datatype=spec["datatype"], shape=self._shape(spec))
        for spec in m["outputs"]:
            out.outputs.add(name=spec["name"], datatype=spec["datatype"], shape=self._shape(spec))
        return out

    def ModelConfig(self, request, context):
        config = config_pb.ModelConfig(name=self.manifest["name"],
                                       max_batch_size=self.manifest.get("max_batch_size", 0))
        return pb.ModelConfigResponse(config=config)

    def ModelInfer(self, request, context):
        m = self.manifest
        by_name = {t.name: i for i, t in enumerate(request.inputs)}
        args = []
        for spec in m["inputs"]:
            i = by_name[spec["name"]]
            shape = list(request.inputs[i].shape)
            raw = request.raw_input_contents[i]
            if spec["datatype"] == "BYTES":
                flat = decode_bytes(raw)
                rows = shape[0] if shape else 1
                per = len(flat) // max(rows, 1)
                args.append([flat[r * per:(r + 1) * per] if per > 1 else flat[r] for r in range(rows)])
            else:
                args.append(torch.from_numpy(
                    np.frombuffer(raw, dtype=NUMPY[spec["datatype"]]).reshape(shape).copy()))
        with torch.inference_mode():
            result = self.model(*args)
        if isinstance(result, dict):
            outputs = [result[o["name"]] for o in m["outputs"]]
        elif isinstance(result, (tuple, list)):
            outputs = list(result)
        else:
            outputs = [result]
        response = pb.ModelInferResponse(model_name=m["name"], model_version=str(m["version"]),
                                         id=request.id)
        for spec, value in zip(m["outputs"], outputs):
            array = value.contiguous().numpy()
            response.outputs.add(name=spec["name"], datatype=spec["datatype"], shape=list(array.shape))
            response.raw_output_contents.append(array.tobytes())
        return response


def serve(archive, port, threads, ready_fd=None):
    servicer = Servicer(archive)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads),
                         options=[("grpc.so_reuseport", 1),
                                  ("grpc.max_receive_message_length", 64 << 20),
                                  ("grpc.max_send_message_length", 64 << 20)])
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    if ready_fd is not None:
        os.write(ready_fd, b"x")
    signal.signal(signal.SIGTERM, lambda *_: server.stop(1))
    server.wait_for_termination()
    return bound


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("archive")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--processes", type=int, default=0,
                        help="0: one process (python-grpc); N: N worker processes (python-processes)")
    parser.add_argument("--threads", type=int, default=16, help="gRPC thread pool per process")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    if args.processes == 0:
        torch.set_num_threads(cores)
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            serve(args.archive, args.port, args.threads, ready_w)
            os._exit(0)
        os.read(ready_r, 1)
        children = [pid]
    else:
        children = []
        ready_r, ready_w = os.pipe()
        for _ in range(args.processes):
            pid = os.fork()
            if pid == 0:
                torch.set_num_threads(max(1, cores // args.processes))
                serve(args.archive, args.port, args.threads, ready_w)
                os._exit(0)
            children.append(pid)
        for _ in children:
            os.read(ready_r, 1)
    print(f"listening on 127.0.0.1:{args.port}", flush=True)

    def stop(*_):
        for pid in children:
            os.kill(pid, signal.SIGTERM)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for pid in children:
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
