"""manypy-client: talk to a manypy server (Open Inference Protocol over gRPC).

    manypy-client [-u HOST:PORT] [--timeout S] health
    manypy-client models [--ready]                 repository index as a table
    manypy-client metadata MODEL [--version V]     model metadata (JSON)
    manypy-client config MODEL                     model configuration (JSON)
    manypy-client stats [MODEL]                    statistics (JSON)
    manypy-client infer MODEL --input NAME[:DATATYPE]=VALUE [--input ...]
                   [--output NAME ...] [--output-dir DIR] [--id ID] [--typed]
    manypy-client generate MODEL --input NAME=VALUE [...] [--json]
                   one request on ModelStreamInfer, each response printed as it
                   arrives (a streaming model's text as text)
    manypy-client load MODEL
    manypy-client unload MODEL

infer --input VALUE is a .npy file, a .json file, or a JSON literal
(e.g. INPUT_A='[1, 2, 3, 4]'); the datatype is the model's (from its
metadata) unless given as NAME:DATATYPE=VALUE. --output-dir writes NAME.npy
per output. The server address defaults to $MANYPY_URL or 127.0.0.1:8001.
Failures exit 1 with "error: CODE: message" on stderr.
"""
import argparse
import json
import os
import sys

import numpy as np

from . import InferenceClient, InferenceServerError
from ._tensors import NUMPY_DTYPES, float32_to_bf16


class UsageError(Exception):
    pass


def _parser():
    p = argparse.ArgumentParser(prog="manypy-client", description=__doc__.split("\n")[0],
                                epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-u", "--url", default=os.environ.get("MANYPY_URL", "127.0.0.1:8001"),
                   help="server address HOST:PORT (default: $MANYPY_URL or 127.0.0.1:8001)")
    p.add_argument("--timeout", type=float, default=None, help="deadline of each call, seconds")
    p.add_argument("--tls-ca", default=None, metavar="FILE",
                   help="TLS: PEM CA certificates that verify the server (plain text without any --tls-*)")
    p.add_argument("--tls-cert", default=None, metavar="FILE",
                   help="TLS: PEM client certificate, for servers that require one")
    p.add_argument("--tls-key", default=None, metavar="FILE", help="TLS: the client certificate's PEM key")
    p.add_argument("--auth-token-file", default=None, metavar="FILE",
                   help="send the token in FILE as a bearer token (servers started with --auth-token-file)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    h = sub.add_parser("health", help="liveness, readiness and grpc.health.v1 status")
    h.add_argument("--service", default="", help="grpc.health.v1 service name (default: the server)")
    m = sub.add_parser("models", help="repository index: every model, version, state, reason")
    m.add_argument("--ready", action="store_true", help="only the models that are ready")
    m.add_argument("--json", action="store_true", help="print JSON instead of a table")
    for name, text in (("metadata", "model metadata as JSON"), ("config", "model configuration as JSON")):
        s = sub.add_parser(name, help=text)
        s.add_argument("model")
        s.add_argument("--version", default="")
    s = sub.add_parser("stats", help="model statistics as JSON (every model without MODEL)")
    s.add_argument("model", nargs="?", default="")
    s.add_argument("--version", default="")
    i = sub.add_parser("infer", help="run one inference")
    i.add_argument("model")
    i.add_argument("--version", default="")
    i.add_argument("-i", "--input", action="append", default=[], metavar="NAME[:DATATYPE]=VALUE",
                   help="an input: a .npy file, a .json file, or a JSON literal (repeatable)")
    i.add_argument("-o", "--output", action="append", default=None, metavar="NAME",
                   help="an output to return (repeatable; default: all)")
    i.add_argument("--output-dir", default=None, metavar="DIR", help="write NAME.npy per output")
    i.add_argument("--id", default="", help="request id (echoed back)")
    i.add_argument("--typed", action="store_true",
                   help="send typed contents and ask for typed outputs instead of raw bytes")
    g = sub.add_parser("generate", help="run one request on a stream, printing each response "
                                        "as it arrives (text as text)")
    g.add_argument("model")
    g.add_argument("--version", default="")
    g.add_argument("-i", "--input", action="append", default=[], metavar="NAME[:DATATYPE]=VALUE",
                   help="an input, as for infer; a value of lower rank than the input gets "
                        "leading dimensions of 1 (-i text_input='\"Hi\"')")
    g.add_argument("--json", action="store_true",
                   help="one JSON line per response instead of the text of a one-string output")
    for name, text in (("load", "load (or reload) a model"), ("unload", "unload a model")):
        s = sub.add_parser(name, help=text)
        s.add_argument("model")
    return p


def _print_json(value):
    print(json.dumps(value, indent=2, sort_keys=False))


def _table(rows, header):
    widths = [max(len(str(r[k])) for r in rows + [header]) for k in range(len(header))]
    for r in [header] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def _read_value(text):
    if text.endswith(".npy"):
        if not os.path.isfile(text):
            raise UsageError(f"no such file: {text}")
        return np.load(text, allow_pickle=True)  # BYTES arrays are object arrays
    if text.endswith(".json") and os.path.isfile(text):
        with open(text) as f:
            return json.load(f)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"not a .npy file, a .json file or JSON: {text!r} ({e})") from None


def _convert(name, value, datatype):
    """value (from .npy / JSON) as an array of the datatype's numpy dtype."""
    if datatype == "BYTES":
        array = np.asarray(value, dtype=object)
        flat = [x if isinstance(x, bytes) else str(x).encode("utf-8") for x in array.reshape(-1)]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(array.shape)
    array = np.asarray(value)
    if datatype == "BF16":
        if array.dtype == np.uint16:
            return array
        return float32_to_bf16(array.astype(np.float32)).reshape(array.shape)
    try:
        return array.astype(NUMPY_DTYPES[datatype])
    except (TypeError, ValueError) as e:
        raise UsageError(f"input '{name}': cannot convert to {datatype}: {e}") from None


def _inputs(client, args):
    if not args.input:
        raise UsageError(f"{args.command} needs at least one --input NAME=VALUE")
    declared = None
    inputs = {}
    for spec in args.input:
        key, sep, text = spec.partition("=")
        if not sep or not key:
            raise UsageError(f"--input {spec!r}: expected NAME[:DATATYPE]=VALUE")
        name, _, datatype = key.partition(":")
        datatype = datatype.upper()
        if datatype and datatype not in NUMPY_DTYPES:
            raise UsageError(f"--input {spec!r}: unknown datatype {datatype}")
        if not datatype:
            if declared is None:
                meta = client.model_metadata(args.model, args.version)
                declared = {t["name"]: t["datatype"] for t in meta.get("inputs", [])}
            datatype = declared.get(name)
            if datatype is None:
                raise UsageError(f"model '{args.model}' has no input named '{name}' "
                                 f"(inputs: {', '.join(declared) or 'none'})")
        inputs[name] = (_convert(name, _read_value(text), datatype), datatype)
    return inputs


def _generate(client, args):
    """Prints each response of one stream as it arrives: the text of a model
    whose responses are one string each, else one JSON line per response."""
    inputs = _inputs(client, args)
    meta = client.model_metadata(args.model, args.version)
    ranks = {t["name"]: len(t.get("shape", [])) for t in meta.get("inputs", [])}
    for name, (array, datatype) in list(inputs.items()):
        while array.ndim < ranks.get(name, 0):
            array = array[np.newaxis]
        inputs[name] = (array, datatype)
    count = 0
    for result in client.generate_stream(args.model, inputs, version=args.version):
        count += 1
        outputs = result.outputs
        only = next(iter(outputs.values())) if len(outputs) == 1 else None
        if not args.json and only is not None and only.dtype == object and only.size == 1:
            piece = only.reshape(-1)[0]
            sys.stdout.write(piece.decode("utf-8", "replace") if isinstance(piece, bytes) else str(piece))
        else:
            print(json.dumps({n: a.tolist() if a.dtype != object else
                              [x.decode("utf-8", "replace") if isinstance(x, bytes) else x
                               for x in a.reshape(-1)] for n, a in outputs.items()}))
        sys.stdout.flush()
    if not args.json:
        sys.stdout.write("\n")
    print(f"({count} responses)", file=sys.stderr)
    return 0


def _summary(array):
    return np.array2string(array, threshold=20, edgeitems=3, max_line_width=100,
                           separator=", ").replace("\n", "\n    ")


# As common/token_file.cc, the reader of manypy-server's own token files and
# of the C++ clients': a file one accepts, the others accept.
_MAX_TOKEN_BYTES = 4096


def _read_token(path, flag="auth-token-file"):
    """The token in `path`: one token of visible ASCII, surrounding whitespace
    trimmed. ValueError naming the flag and the file otherwise (never the token)."""
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            content = f.read(_MAX_TOKEN_BYTES + 1)
    except OSError:
        raise ValueError(f"--{flag}: cannot read the token file {path}") from None
    if len(content) > _MAX_TOKEN_BYTES:
        raise ValueError(f"--{flag}: the token file {path} is larger than {_MAX_TOKEN_BYTES} "
                         f"bytes; it must hold one token")
    token = content.strip()  # C's isspace set: space, \t, \n, \v, \f, \r
    if not token:
        raise ValueError(f"--{flag}: the token file {path} is empty")
    if any(c < 0x21 or c > 0x7e for c in token):
        raise ValueError(f"--{flag}: the token file {path} must hold one token of visible ASCII "
                         f"characters, without spaces")
    return token.decode("ascii")


def _run(args):
    client = InferenceClient(args.url, timeout=args.timeout, root_certificates=args.tls_ca,
                             certificate_chain=args.tls_cert, private_key=args.tls_key,
                             token=_read_token(args.auth_token_file))
    try:
        if args.command == "health":
            live = client.is_server_live()
            ready = client.is_server_ready()
            status = client.health(args.service)
            print(f"live: {str(live).lower()}")
            print(f"ready: {str(ready).lower()}")
            print(f"health: {status}")
            return 0 if live and ready and status == "SERVING" else 1
        if args.command == "models":
            models = client.repository_index(ready=args.ready)
            if args.json:
                _print_json(models)
            else:
                rows = [[m.get("name", ""), m.get("version", ""), m.get("state", ""),
                         m.get("reason", "")] for m in models]
                _table(rows, ["NAME", "VERSION", "STATE", "REASON"])
            return 0
        if args.command == "metadata":
            _print_json(client.model_metadata(args.model, args.version))
            return 0
        if args.command == "config":
            _print_json(client.model_config(args.model, args.version))
            return 0
        if args.command == "stats":
            _print_json(client.model_statistics(args.model, args.version))
            return 0
        if args.command == "load":
            client.load_model(args.model)
            print(f"loaded {args.model}")
            return 0
        if args.command == "unload":
            client.unload_model(args.model)
            print(f"unloaded {args.model}")
            return 0
        if args.command == "generate":
            return _generate(client, args)
        if args.command == "infer":
            inputs = _inputs(client, args)
            result = client.infer(args.model, inputs, outputs=args.output, version=args.version,
                                  request_id=args.id, binary=not args.typed,
                                  binary_outputs=not args.typed)
            print(f"model: {result.model_name}  version: {result.model_version}"
                  + (f"  id: {result.id}" if result.id else ""))
            if args.output_dir:
                os.makedirs(args.output_dir, exist_ok=True)
            for name, array in result.outputs.items():
                print(f"{name}: {result.datatype(name)} {list(array.shape)}")
                print(f"    {_summary(array)}")
                if args.output_dir:
                    path = os.path.join(args.output_dir, name.replace(os.sep, "_") + ".npy")
                    np.save(path, array, allow_pickle=array.dtype == object)
                    print(f"    -> {path}")
            return 0
        raise UsageError(f"unknown command {args.command}")
    finally:
        client.close()


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except InferenceServerError as e:
        print(f"error: {e.status_code}: {e.message}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `manypy-client config m | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (UsageError, OSError, ValueError, TypeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
