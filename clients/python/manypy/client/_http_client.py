"""HttpInferenceClient: the KServe v2 REST protocol (with Triton's binary-data
extension) from Python, with the same API as the gRPC InferenceClient.
Standard library only (http.client, one keep-alive connection per thread)."""
import http.client
import json
import ssl
import threading
import urllib.parse

import numpy as np

from . import _tensors
from ._client import InferenceServerError, InferResult
from ._proto import grpc_service_pb2 as pb

# HTTP status -> the status code names InferenceServerError carries over gRPC.
_CODES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
          404: "NOT_FOUND", 409: "ALREADY_EXISTS", 413: "RESOURCE_EXHAUSTED",
          429: "RESOURCE_EXHAUSTED", 499: "CANCELLED", 500: "INTERNAL", 503: "UNAVAILABLE",
          504: "DEADLINE_EXCEEDED"}


def _client_ssl_context(root_certificates, certificate_chain, private_key):
    """TLS 1.2+ with the server's certificate and host name verified."""
    if bool(certificate_chain) != bool(private_key):
        raise ValueError("certificate_chain and private_key go together")
    context = ssl.create_default_context(cafile=root_certificates)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if certificate_chain:
        context.load_cert_chain(certificate_chain, private_key)
    return context


def _json_values(array, datatype):
    """A tensor's elements as JSON values (flat, row-major)."""
    flat = array.reshape(-1)
    if datatype == "BYTES":
        return [_tensors._to_bytes(x).decode("utf-8") for x in flat]
    if datatype == "BF16":
        return _tensors.bf16_to_float32(flat).tolist()
    return flat.tolist()


def _from_json(values, datatype, shape, name):
    if datatype == "BYTES":
        out = np.empty(len(values), dtype=object)
        out[:] = [v.encode("utf-8") for v in values]
        return out.reshape(shape)
    if datatype == "BF16":
        return _tensors.float32_to_bf16(np.asarray(values, np.float32)).reshape(shape)
    return np.asarray(values, dtype=_tensors.NUMPY_DTYPES[datatype]).reshape(shape)


class HttpInferenceClient:
    """A client of one manypy (or any KServe v2 / Triton HTTP) server.

        client = HttpInferenceClient("127.0.0.1:8000")
        client.infer("two_io", {"INPUT_A": np.ones(4, np.float32), "INPUT_B": np.arange(4)})

    The methods and results are those of InferenceClient; inputs and outputs
    travel as binary data by default (binary=False / binary_outputs=False:
    JSON). stream_infer sends the requests one after another. Failures raise
    InferenceServerError with the gRPC status code name of the HTTP status.
    Thread-safe: each thread uses its own keep-alive connection.

    TLS (plain HTTP by default): an https:// URL, or any of the PEM file paths
    `root_certificates` (CAs that verify the server; default: the system's),
    `certificate_chain` and `private_key` (a client certificate, for servers
    started with --tls-client-ca), or a ready `ssl_context`. The server's
    certificate is checked against the URL's host."""

    def __init__(self, url="127.0.0.1:8000", timeout=None, root_certificates=None,
                 certificate_chain=None, private_key=None, ssl_context=None, token=None):
        if "://" not in url:
            tls = bool(root_certificates or certificate_chain or private_key or ssl_context)
            url = ("https://" if tls else "http://") + url
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https"):
            raise ValueError(f"url {url!r}: the scheme is http or https")
        self.url = url
        self.timeout = timeout
        # Sent with every request (servers started with --auth-token-file).
        self._authorization = f"Bearer {token}" if token else None
        self._ssl_context = None
        if parsed.scheme == "https":
            self._ssl_context = ssl_context or _client_ssl_context(
                root_certificates, certificate_chain, private_key)
        self._host = parsed.hostname
        self._port = parsed.port or (443 if self._ssl_context else 80)
        self._local = threading.local()
        self._connections = []
        self._lock = threading.Lock()

    # --- plumbing ----------------------------------------------------------

    def close(self):
        with self._lock:
            for c in self._connections:
                c.close()
            self._connections.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _connection(self, timeout):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._ssl_context is not None:
                conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                                   context=self._ssl_context)
            else:
                conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _request(self, method, path, body=None, headers=None, timeout=None):
        """(status, headers, body bytes); a connection the server closed is reopened once."""
        timeout = self.timeout if timeout is None else timeout
        headers = dict(headers or {})
        if self._authorization:
            headers["Authorization"] = self._authorization
        if body is not None and "Content-Type" not in headers:
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            conn = self._connection(timeout)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                return response.status, response, data
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                conn.close()
                if attempt:
                    raise InferenceServerError("UNAVAILABLE", "the server closed the connection")
            except TimeoutError:
                conn.close()
                raise InferenceServerError("DEADLINE_EXCEEDED", "no response within the timeout")
            except OSError as e:  # ssl.SSLError (a refused certificate) included
                conn.close()
                raise InferenceServerError("UNAVAILABLE", str(e)) from None

    def _json(self, method, path, body=None, timeout=None, ok=(200,)):
        status, _, data = self._request(method, path, body, timeout=timeout)
        if status not in ok:
            raise self._error(status, data)
        return json.loads(data) if data else {}

    @staticmethod
    def _error(status, data):
        try:
            message = json.loads(data).get("error", "")
        except (ValueError, AttributeError):
            message = data.decode("utf-8", "replace")
        return InferenceServerError(_CODES.get(status, "UNKNOWN"), message or f"HTTP {status}")

    @staticmethod
    def _model_path(name, version):
        path = "/v2/models/" + urllib.parse.quote(name, safe="")
        return path + (f"/versions/{version}" if str(version) else "")

    # --- health ------------------------------------------------------------

    def is_server_live(self, timeout=None):
        return self._request("GET", "/v2/health/live", timeout=timeout)[0] == 200

    def is_server_ready(self, timeout=None):
        return self._request("GET", "/v2/health/ready", timeout=timeout)[0] == 200

    def is_model_ready(self, name, version="", timeout=None):
        return self._request("GET", self._model_path(name, version) + "/ready", timeout=timeout)[0] == 200

    def health(self, service="", timeout=None):
        """"SERVING" or "NOT_SERVING" (server readiness; HTTP has no grpc.health)."""
        return "SERVING" if self.is_server_ready(timeout) else "NOT_SERVING"

    # --- metadata ----------------------------------------------------------

    def server_metadata(self, timeout=None):
        return self._json("GET", "/v2", timeout=timeout)

    def model_metadata(self, name, version="", timeout=None):
        return self._json("GET", self._model_path(name, version), timeout=timeout)

    def model_config(self, name, version="", timeout=None):
        return self._json("GET", self._model_path(name, version) + "/config", timeout=timeout)

    def model_statistics(self, name="", version="", timeout=None):
        path = self._model_path(name, version) + "/stats" if name else "/v2/models/stats"
        return self._json("GET", path, timeout=timeout)

    def repository_index(self, ready=False, timeout=None):
        return self._json("POST", "/v2/repository/index", json.dumps({"ready": bool(ready)}),
                          timeout=timeout)

    # --- repository --------------------------------------------------------

    def load_model(self, name, timeout=None):
        self._json("POST", f"/v2/repository/models/{urllib.parse.quote(name, safe='')}/load", "{}",
                   timeout=timeout)

    def unload_model(self, name, timeout=None):
        self._json("POST", f"/v2/repository/models/{urllib.parse.quote(name, safe='')}/unload", "{}",
                   timeout=timeout)

    # --- inference ---------------------------------------------------------

    def make_request(self, model, inputs, outputs=None, version="", request_id="", binary=True,
                     binary_outputs=True, parameters=None, timeout=None):
        """(body bytes, JSON header length or None) that infer() would send."""
        if not isinstance(inputs, dict):
            raise TypeError("inputs must be a dict: input name -> numpy array "
                            "(or (array, datatype) tuple)")
        header = {"inputs": []}
        if request_id:
            header["id"] = str(request_id)
        params = dict(parameters or {})
        params["binary_data_output"] = bool(binary_outputs)
        header["parameters"] = params
        blobs = []
        for name, value in inputs.items():
            array, datatype = _tensors.as_tensor(value, name)
            tensor = {"name": name, "shape": list(array.shape), "datatype": datatype}
            if binary:
                raw = _tensors.to_raw(array, datatype)
                tensor["parameters"] = {"binary_data_size": len(raw)}
                blobs.append(raw)
            else:
                tensor["data"] = _json_values(array, datatype)
            header["inputs"].append(tensor)
        if isinstance(outputs, str):
            outputs = [outputs]
        if outputs:
            header["outputs"] = [{"name": n, "parameters": {"binary_data": bool(binary_outputs)}}
                                 for n in outputs]
        text = json.dumps(header).encode("utf-8")
        if not blobs:
            return text, None
        return text + b"".join(blobs), len(text)

    def infer(self, model, inputs, outputs=None, version="", request_id="", binary=True,
              binary_outputs=True, timeout=None, parameters=None):
        """Runs one inference; arguments and result as InferenceClient.infer."""
        body, json_length = self.make_request(model, inputs, outputs, version, request_id, binary,
                                              binary_outputs, parameters, timeout)
        headers = {}
        if json_length is not None:
            headers["Inference-Header-Content-Length"] = str(json_length)
            headers["Content-Type"] = "application/octet-stream"
        status, response, data = self._request("POST", self._model_path(model, version) + "/infer",
                                               body, headers, timeout)
        if status != 200:
            raise self._error(status, data)
        return InferResult(self._to_proto(response, data))

    def stream_infer(self, model, requests, outputs=None, version="", binary=True,
                     binary_outputs=True, timeout=None, parameters=None):
        """As InferenceClient.stream_infer, one request after another."""
        for index, item in enumerate(requests):
            inputs, request_id = item if isinstance(item, tuple) else (item, str(index))
            try:
                yield self.infer(model, inputs, outputs, version, str(request_id), binary,
                                 binary_outputs, timeout, parameters)
            except InferenceServerError as e:
                failed = pb.ModelInferResponse(id=str(request_id), model_name=model)
                yield InferResult(failed, e)

    # --- the generate extension ---------------------------------------------

    def generate(self, model, fields, version="", timeout=None, parameters=None):
        """POST /generate: `fields` is {input name: a JSON value} (a string,
        number or boolean, or nested lists of them); returns the response as
        a dict {output name: value, "model_name", "model_version"}. A
        streaming model must yield exactly one response here (else use
        generate_stream)."""
        body = self._generate_body(fields, parameters)
        status, _, data = self._request("POST", self._model_path(model, version) + "/generate",
                                        body, {"Content-Type": "application/json"}, timeout)
        if status != 200:
            raise self._error(status, data)
        return json.loads(data)

    def generate_stream(self, model, fields, version="", timeout=None, parameters=None):
        """POST /generate_stream: yields each response (a dict, as generate())
        as its server-sent event arrives. An error event raises
        InferenceServerError after the responses before it."""
        body = self._generate_body(fields, parameters)
        connection = self._connection(self.timeout if timeout is None else timeout)
        try:
            headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
            if self._authorization:
                headers["Authorization"] = self._authorization
            connection.request("POST", self._model_path(model, version) + "/generate_stream",
                               body=body, headers=headers)
            response = connection.getresponse()
            if response.status != 200:
                raise self._error(response.status, response.read())
            for line in response:  # http.client undoes the chunking
                if not line.startswith(b"data: "):
                    continue
                event = json.loads(line[6:])
                if "error" in event and len(event) == 1:
                    # The stream's status was 200 already: the event has only the message.
                    raise InferenceServerError("UNKNOWN", event["error"])
                yield event
        except TimeoutError:
            raise InferenceServerError("DEADLINE_EXCEEDED", "no response within the timeout") from None
        except (http.client.HTTPException, OSError) as e:
            raise InferenceServerError("UNAVAILABLE", str(e)) from None
        finally:
            connection.close()  # early: the server sees the client leave and stops the model

    @staticmethod
    def _generate_body(fields, parameters):
        if not isinstance(fields, dict):
            raise TypeError("fields must be a dict: input name -> JSON value")
        body = dict(fields)
        if parameters:
            body["parameters"] = dict(parameters)
        return json.dumps(body).encode("utf-8")

    @staticmethod
    def _to_proto(response, data):
        """The HTTP reply as the ModelInferResponse InferResult reads (raw outputs)."""
        length = response.getheader("Inference-Header-Content-Length")
        json_length = int(length) if length is not None else len(data)
        header = json.loads(data[:json_length])
        binary = memoryview(data)[json_length:]
        message = pb.ModelInferResponse(model_name=header.get("model_name", ""),
                                        model_version=header.get("model_version", ""),
                                        id=header.get("id", ""))
        pos = 0
        for out in header.get("outputs", []):
            shape = [int(d) for d in out["shape"]]
            message.outputs.add(name=out["name"], datatype=out["datatype"], shape=shape)
            size = out.get("parameters", {}).get("binary_data_size")
            if size is not None:
                raw = bytes(binary[pos:pos + size])
                pos += size
            else:
                array = _from_json(out.get("data", []), out["datatype"], shape, out["name"])
                raw = _tensors.to_raw(array, out["datatype"])
            message.raw_output_contents.append(raw)
        return message
