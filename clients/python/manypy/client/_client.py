"""InferenceClient: the Open Inference Protocol (KServe v2 / Triton gRPC) from Python."""
import threading

import grpc
import numpy as np
from google.protobuf import json_format

from . import _tensors
from ._proto import grpc_service_pb2 as pb
from ._proto import grpc_service_pb2_grpc as pb_grpc
from ._proto import health_pb2, health_pb2_grpc

_STATUS_NAMES = {code.name for code in grpc.StatusCode}


class InferenceServerError(Exception):
    """A failed call. `status_code` is the gRPC status code's name
    ("NOT_FOUND", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", ...), `message` the
    server's (or gRPC's) message. str(error) is "CODE: message"."""

    def __init__(self, status_code, message):
        super().__init__(f"{status_code}: {message}")
        self.status_code = status_code
        self.message = message

    @classmethod
    def from_rpc_error(cls, error):
        code = error.code() if hasattr(error, "code") else None
        details = error.details() if hasattr(error, "details") else None
        name = code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"
        return cls(name, details if details is not None else str(error))

    @classmethod
    def from_stream_message(cls, text):
        # The server writes "CODE: message" into ModelStreamInferResponse.error_message.
        code, sep, message = text.partition(": ")
        if sep and code in _STATUS_NAMES:
            return cls(code, message)
        return cls("UNKNOWN", text)


def _read_pem(path, what):
    """The bytes of PEM file `path` (None for None); ValueError naming `what` otherwise."""
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"{what}: cannot read {path}: {e.strerror}") from None
    if not data:
        raise ValueError(f"{what}: {path} is empty")
    return data


def _to_dict(message):
    """A protobuf message as a plain dict: proto field names, fields with
    default values included, 64-bit integers as Python ints (not strings)."""
    try:
        d = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                      including_default_value_fields=True)
    except TypeError:  # protobuf >= 5.26 renamed the option
        d = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                      always_print_fields_with_no_presence=True)
    _fix_int64(message.DESCRIPTOR, d)
    return d


_INT64_TYPES = None


def _fix_int64(descriptor, d):
    global _INT64_TYPES
    from google.protobuf.descriptor import FieldDescriptor as F
    if _INT64_TYPES is None:
        _INT64_TYPES = {F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_SINT64, F.TYPE_FIXED64,
                        F.TYPE_SFIXED64}
    for key, value in d.items():
        field = descriptor.fields_by_name.get(key)
        if field is None:
            continue
        if field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                vfield = field.message_type.fields_by_name["value"]
                for k in list(value):
                    value[k] = _fix_value(vfield, value[k])
            elif field.label == F.LABEL_REPEATED:
                for item in value:
                    if isinstance(item, dict):
                        _fix_int64(field.message_type, item)
            elif isinstance(value, dict):
                _fix_int64(field.message_type, value)
        elif field.type in _INT64_TYPES:
            d[key] = [int(v) for v in value] if isinstance(value, list) else int(value)


def _fix_value(field, value):
    if field.message_type is not None:
        if isinstance(value, dict):
            _fix_int64(field.message_type, value)
        return value
    if field.type in _INT64_TYPES:
        return int(value)
    return value


def _set_parameter(param, value):
    if isinstance(value, (bool, np.bool_)):
        param.bool_param = bool(value)
    elif isinstance(value, (int, np.integer)):
        if int(value) > 2**63 - 1:
            param.uint64_param = int(value)
        else:
            param.int64_param = int(value)
    elif isinstance(value, (float, np.floating)):
        param.double_param = float(value)
    elif isinstance(value, str):
        param.string_param = value
    else:
        raise TypeError(f"parameter value {value!r}: expected bool, int, float or str")


def _parameter_value(param):
    which = param.WhichOneof("parameter_choice")
    return getattr(param, which) if which else None


class InferResult:
    """The outputs of one inference.

    `outputs`: dict output name -> numpy array, in the response's order;
    `as_numpy(name)`; `datatype(name)`; `id`, `model_name`, `model_version`,
    `parameters` (dict); `response` (the ModelInferResponse message). A BF16
    output is a uint16 array of bfloat16 bit patterns
    (manypy.client.bf16_to_float32 converts it). A result from stream_infer
    whose request failed has `error` set (an InferenceServerError) and no
    outputs; as_numpy() raises that error."""

    def __init__(self, response, error=None):
        self.response = response
        self.error = error
        self.id = response.id
        self.model_name = response.model_name
        self.model_version = response.model_version
        self.parameters = {k: _parameter_value(v) for k, v in response.parameters.items()}
        self.outputs = {}
        self._datatypes = {}
        if error is not None:
            return
        raw = response.raw_output_contents
        if raw and len(raw) != len(response.outputs):
            raise InferenceServerError(
                "INTERNAL", f"response has {len(response.outputs)} outputs but "
                f"{len(raw)} raw_output_contents")
        for i, out in enumerate(response.outputs):
            if raw:
                array = _tensors.from_raw(raw[i], out.datatype, out.shape, out.name)
            else:
                array = _tensors.from_typed(out.contents, out.datatype, out.shape, out.name)
            self.outputs[out.name] = array
            self._datatypes[out.name] = out.datatype

    @property
    def ok(self):
        return self.error is None

    def as_numpy(self, name):
        if self.error is not None:
            raise self.error
        try:
            return self.outputs[name]
        except KeyError:
            raise KeyError(f"no output named {name!r} in the response "
                           f"(outputs: {', '.join(self.outputs) or 'none'})") from None

    def datatype(self, name):
        return self._datatypes[name]

    def __repr__(self):
        if self.error is not None:
            return f"<InferResult id={self.id!r} error={self.error}>"
        shapes = ", ".join(f"{n}:{self._datatypes[n]}{list(a.shape)}" for n, a in self.outputs.items())
        return f"<InferResult model={self.model_name!r} version={self.model_version!r} {shapes}>"


class InferenceClient:
    """A client of one manypy (or any KServe v2 / Triton gRPC) server.

        client = InferenceClient("127.0.0.1:8001")
        result = client.infer("two_io", {"INPUT_A": np.ones(4, np.float32),
                                         "INPUT_B": np.arange(4)})
        result.as_numpy("SUM")

    `timeout` (seconds) is the default deadline of every call; each method
    takes its own `timeout` too. Every failed call raises InferenceServerError.
    `max_message_size` (bytes) bounds the messages sent and received. Usable
    as a context manager (closes the channel).

    TLS (plain text by default): `ssl=True`, or any of the PEM file paths
    `root_certificates` (CAs that verify the server; default: gRPC's roots),
    `certificate_chain` and `private_key` (a client certificate, for servers
    started with --tls-client-ca). The server's certificate must name the
    host in `url`. `token` (servers started with --auth-token-file or
    --management-token-file) goes with every call as `authorization: Bearer
    <token>`."""

    def __init__(self, url="127.0.0.1:8001", timeout=None, max_message_size=2**31 - 1,
                 channel_options=None, ssl=False, root_certificates=None,
                 certificate_chain=None, private_key=None, token=None):
        self.url = url
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        options = [("grpc.max_send_message_length", max_message_size),
                   ("grpc.max_receive_message_length", max_message_size)]
        options += list(channel_options or [])
        if ssl or root_certificates or certificate_chain or private_key:
            if bool(certificate_chain) != bool(private_key):
                raise ValueError("certificate_chain and private_key go together")
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_pem(root_certificates, "root_certificates"),
                private_key=_read_pem(private_key, "private_key"),
                certificate_chain=_read_pem(certificate_chain, "certificate_chain"))
            self._channel = grpc.secure_channel(url, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(url, options=options)
        self._stub = pb_grpc.GRPCInferenceServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._outputs_cache = {}
        self._lock = threading.Lock()

    # --- plumbing ----------------------------------------------------------

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _deadline(self, timeout):
        return self.timeout if timeout is None else timeout

    def _call(self, method, request, timeout):
        try:
            return method(request, timeout=self._deadline(timeout), metadata=self._metadata)
        except grpc.RpcError as e:
            raise InferenceServerError.from_rpc_error(e) from None

    # --- health ------------------------------------------------------------

    def is_server_live(self, timeout=None):
        return self._call(self._stub.ServerLive, pb.ServerLiveRequest(), timeout).live

    def is_server_ready(self, timeout=None):
        return self._call(self._stub.ServerReady, pb.ServerReadyRequest(), timeout).ready

    def is_model_ready(self, name, version="", timeout=None):
        request = pb.ModelReadyRequest(name=name, version=str(version))
        return self._call(self._stub.ModelReady, request, timeout).ready

    def health(self, service="", timeout=None):
        """grpc.health.v1 Check: "SERVING", "NOT_SERVING", "UNKNOWN", ..."""
        request = health_pb2.HealthCheckRequest(service=service)
        response = self._call(self._health.Check, request, timeout)
        return health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)

    # --- metadata ----------------------------------------------------------

    def server_metadata(self, timeout=None):
        return _to_dict(self._call(self._stub.ServerMetadata, pb.ServerMetadataRequest(), timeout))

    def model_metadata(self, name, version="", timeout=None):
        request = pb.ModelMetadataRequest(name=name, version=str(version))
        return _to_dict(self._call(self._stub.ModelMetadata, request, timeout))

    def model_config(self, name, version="", timeout=None):
        """The model's configuration (Triton ModelConfig) as a dict; the
        response's `config` message, not wrapped."""
        request = pb.ModelConfigRequest(name=name, version=str(version))
        return _to_dict(self._call(self._stub.ModelConfig, request, timeout).config)

    def model_statistics(self, name="", version="", timeout=None):
        """{"model_stats": [...]}: every model when name is empty."""
        request = pb.ModelStatisticsRequest(name=name, version=str(version))
        return _to_dict(self._call(self._stub.ModelStatistics, request, timeout))

    def repository_index(self, ready=False, timeout=None):
        """A list of {"name", "version", "state", "reason"} dicts."""
        request = pb.RepositoryIndexRequest(ready=ready)
        return _to_dict(self._call(self._stub.RepositoryIndex, request, timeout)).get("models", [])

    # --- repository --------------------------------------------------------

    def load_model(self, name, timeout=None):
        self._call(self._stub.RepositoryModelLoad, pb.RepositoryModelLoadRequest(model_name=name),
                   timeout)
        self._forget(name)

    def unload_model(self, name, timeout=None):
        self._call(self._stub.RepositoryModelUnload,
                   pb.RepositoryModelUnloadRequest(model_name=name), timeout)
        self._forget(name)

    def _forget(self, name):
        with self._lock:
            for key in [k for k in self._outputs_cache if k[0] == name]:
                del self._outputs_cache[key]

    # --- inference ---------------------------------------------------------

    def _output_names(self, model, version, timeout):
        key = (model, str(version))
        with self._lock:
            names = self._outputs_cache.get(key)
        if names is None:
            names = [o["name"] for o in self.model_metadata(model, version, timeout).get("outputs", [])]
            with self._lock:
                self._outputs_cache[key] = names
        return names

    def make_request(self, model, inputs, outputs=None, version="", request_id="", binary=True,
                     binary_outputs=True, parameters=None, timeout=None):
        """The ModelInferRequest message that infer() would send."""
        if not isinstance(inputs, dict):
            raise TypeError("inputs must be a dict: input name -> numpy array "
                            "(or (array, datatype) tuple)")
        request = pb.ModelInferRequest(model_name=model, model_version=str(version),
                                       id=request_id)
        for key, value in (parameters or {}).items():
            _set_parameter(request.parameters[key], value)
        for name, value in inputs.items():
            array, datatype = _tensors.as_tensor(value, name)
            tensor = request.inputs.add(name=name, datatype=datatype, shape=list(array.shape))
            if binary:
                request.raw_input_contents.append(_tensors.to_raw(array, datatype))
            else:
                _tensors.fill_typed(tensor.contents, array, datatype, name)
        if isinstance(outputs, str):
            outputs = [outputs]
        if outputs is None and not binary_outputs:
            # Typed outputs have to be asked for output by output.
            outputs = self._output_names(model, version, timeout)
        for name in outputs or []:
            requested = request.outputs.add(name=name)
            requested.parameters["binary_data"].bool_param = bool(binary_outputs)
        return request

    def infer(self, model, inputs, outputs=None, version="", request_id="", binary=True,
              binary_outputs=True, timeout=None, parameters=None):
        """Runs one inference.

        inputs: dict input name -> numpy array (or anything numpy.asarray
        takes), or -> (array, datatype) to name the datatype (needed for BF16:
        a uint16 array of bit patterns, or floats that are rounded to BF16).
        BYTES: a numpy object array of bytes (str is sent UTF-8).
        outputs: output names to return (default: all), in that order.
        binary: send raw_input_contents (True) or typed contents (False; FP16
        and BF16 have no typed field). binary_outputs: False asks for typed
        output contents (the server still sends raw when an FP16/BF16 output
        is among them). parameters: dict of request parameters (bool, int,
        float, str). Returns an InferResult."""
        request = self.make_request(model, inputs, outputs, version, request_id, binary,
                                    binary_outputs, parameters, timeout)
        return InferResult(self._call(self._stub.ModelInfer, request, timeout))

    def stream_infer(self, model, requests, outputs=None, version="", binary=True,
                     binary_outputs=True, timeout=None, parameters=None):
        """ModelStreamInfer: sends every request on one bidirectional stream and
        yields an InferResult per response, as they arrive (not necessarily in
        request order: match them by `id`).

        requests: an iterable of input dicts, or of (input dict, request id)
        tuples; requests without an id get their index ("0", "1", ...). A
        request the server rejects yields an InferResult with `error` set (the
        stream goes on); a failure of the stream itself raises
        InferenceServerError. `timeout` bounds the whole stream."""
        problem = []
        if outputs is None and not binary_outputs:
            outputs = self._output_names(model, version, timeout)

        def messages():
            try:
                for index, item in enumerate(requests):
                    if isinstance(item, tuple):
                        inputs, request_id = item
                    else:
                        inputs, request_id = item, str(index)
                    yield self.make_request(model, inputs, outputs, version, str(request_id),
                                            binary, binary_outputs, parameters, timeout)
            except Exception as e:  # raised again in the caller's thread below
                problem.append(e)

        try:
            for response in self._stub.ModelStreamInfer(messages(), timeout=self._deadline(timeout),
                                                         metadata=self._metadata):
                if response.error_message:
                    yield InferResult(response.infer_response,
                                      InferenceServerError.from_stream_message(response.error_message))
                else:
                    yield InferResult(response.infer_response)
        except grpc.RpcError as e:
            if problem:
                raise problem[0]
            raise InferenceServerError.from_rpc_error(e) from None
        if problem:
            raise problem[0]

    def generate_stream(self, model, inputs, version="", request_id="", timeout=None,
                        parameters=None):
        """Runs one request on ModelStreamInfer and yields an InferResult per
        response as it arrives: for a streaming (decoupled) model one per
        value its generator yields, for any other model its one response.
        Asks for Triton's empty final response
        (triton_enable_empty_final_response) to know where the stream ends,
        and stops there. An error (from the model mid-stream, or a refusal)
        raises InferenceServerError after the responses before it. Arguments
        as infer(); closing the generator early cancels the request (the
        server closes the model's generator)."""
        params = dict(parameters or {})
        params["triton_enable_empty_final_response"] = True
        request = self.make_request(model, inputs, None, version, request_id,
                                    parameters=params, timeout=timeout)
        call = self._stub.ModelStreamInfer(iter([request]), timeout=self._deadline(timeout),
                                           metadata=self._metadata)
        try:
            for response in call:
                if response.error_message:
                    raise InferenceServerError.from_stream_message(response.error_message)
                final = response.infer_response.parameters.get("triton_final_response")
                if final is None:  # an ordinary model: its one response
                    yield InferResult(response.infer_response)
                    return
                if final.bool_param:
                    return
                yield InferResult(response.infer_response)
        except grpc.RpcError as e:
            raise InferenceServerError.from_rpc_error(e) from None
        finally:
            call.cancel()  # no-op once the stream is done; else the server stops the model
