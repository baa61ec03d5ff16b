"""manypy.client: a Python client of the manypy model server (the Open
Inference Protocol, KServe v2 / Triton-compatible gRPC).

    from manypy.client import InferenceClient, InferenceServerError
    import numpy as np

    with InferenceClient("127.0.0.1:8001", timeout=10) as client:
        client.is_server_ready()                      # True
        client.model_metadata("two_io")               # plain dict
        result = client.infer("two_io", {"INPUT_A": np.array([1, 2, 3, 4], np.float32),
                                         "INPUT_B": np.array([10, 20, 30, 40])})
        result.as_numpy("SUM")                        # array([11., 22., 33., 44.], dtype=float32)

HttpInferenceClient("127.0.0.1:8000") has the same API over the KServe v2
REST protocol (binary data by default; JSON with binary=False,
binary_outputs=False).

Every failed call raises InferenceServerError(status_code, message), where
status_code is the gRPC code's name ("NOT_FOUND", "INVALID_ARGUMENT", ...).

The generated protocol stubs (package manypy_proto, made by the build in
build/python) are found through MANYPY_PROTO_PYTHON (the folder containing
manypy_proto/), else sys.path, else build/python of this source tree.
`manypy-client` (build/bin/manypy-client, or `python3 -m manypy.client.cli`)
is the command line tool.
"""
from ._client import InferenceClient, InferenceServerError, InferResult
from ._http_client import HttpInferenceClient
from ._tensors import DATATYPES, NUMPY_DTYPES, bf16_to_float32, float32_to_bf16

__all__ = ["DATATYPES", "HttpInferenceClient", "InferResult", "InferenceClient",
           "InferenceServerError",
           "NUMPY_DTYPES", "bf16_to_float32", "float32_to_bf16"]
