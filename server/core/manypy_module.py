"""manypy, as a model's Python sees it inside manypy-server.

Every interpreter of the server defines this module as `manypy` before any
archive loads (archives extern `manypy`; outside the server the packaging
tool's package answers the same names: package_format/python/manypy/).

    import manypy

    class Pipeline(torch.nn.Module):
        def forward(self, image):
            boxes = manypy.infer("detector", {"INPUT__0": image})["boxes"]
            crops = [manypy.submit("classifier", {"INPUT__0": c}) for c in crop(image, boxes)]
            return torch.stack([f.result()["OUTPUT__0"] for f in crops])

infer(model, inputs, *, version=None, timeout=None, parameters=None) runs
another loaded model: inputs is a dict of input name -> tensor (a BYTES
input: a nested list of bytes or str); it returns the outputs as a dict of
name -> tensor (BYTES as lists). The request goes through the callee's
scheduler like any other; the caller's remaining deadline (or `timeout`
seconds, if sooner) and its clients leaving carry over. A failure raises
InferenceError with the status ("NOT_FOUND", "INVALID_ARGUMENT",
"INTERNAL", ...) and the server's message. submit(...) takes the same
arguments and returns a Future at once (result() waits), so a model can fan
out to several models; calls not waited for are waited for when the model's
call returns.

request: the running request: id, parameters (a dict), seconds_left (None
without a deadline), client_left (every client has gone: stop early);
for a model with sequence_batching, state: the request's sequence's own
dict, the same object for each request of the sequence (kept in this
interpreter, where all of them run), dropped when the sequence ends or times
out; sequence_id. Both are None for other models.

log.info / log.warning / log.error / log.verbose(message, **fields): a line
in the server's log, in its format (text, or JSON with the fields), naming
the model.

trace: the request's OpenTelemetry span, when the server traces
(--tracing) and sampled the request: `with trace.span(name, **attributes):`
records a child span of the request's span over the block (an exception
marks it failed, and goes on); trace.set_attribute(key, value) adds an
attribute to the request's span (to each request's of a batch). Both do
nothing when the request is not traced, or no request runs.
request.trace_id is the trace's id (32 hex digits), or None. Nested
infer/submit calls are children of the request's span on their own.

metrics.counter / gauge / histogram(name, documentation, labels=(...)):
the model's own metrics on the server's /metrics, with prometheus_client's
methods (inc, dec, set, observe, labels(...)); every sample also gets the
model's name and version as labels.
"""
import threading
import time

import _manypy

__all__ = ["InferenceError", "Future", "infer", "submit", "request", "log", "metrics", "trace"]


class InferenceError(Exception):
    """A nested call failed: `status` is the status code name, `message` the
    server's message. str(error) is "STATUS: message"."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


_local = threading.local()


def _stack():
    # One list of unwaited calls per model call running on this thread: a
    # nested call run on its caller's thread stacks on its caller's.
    stack = getattr(_local, "calls", None)
    if stack is None:
        stack = _local.calls = [[]]
    return stack


def _pending():
    return _stack()[-1]


def _current_model():
    models = getattr(_local, "models", None)
    return models[-1] if models else getattr(_local, "model", None) or "?"


def _enter(model):
    """The model runtime: `model` is loading on this thread (for log lines)."""
    _local.model = model


def _begin(model):
    """The model runtime: a call of `model` starts on this thread."""
    _stack().append([])
    models = getattr(_local, "models", None)
    if models is None:
        models = _local.models = []
    models.append(model)


def _call(service, request):
    try:
        return _manypy.call_host(service, request)
    except _manypy.HostError as e:
        raise InferenceError(*e.args) from None


_torch = None  # the torch module, imported at the first call (not at boot)


def _as_value(name, value):
    global _torch
    if _torch is None:
        import torch
        _torch = torch
    if isinstance(value, _torch.Tensor):
        # The tensor itself crosses (no copy); one that requires grad crosses
        # without its graph.
        return value.detach() if value.requires_grad else value
    torch = _torch
    if isinstance(value, (list, tuple)):
        return list(value)
    if hasattr(value, "__array__"):  # numpy
        return torch.as_tensor(value)
    if isinstance(value, (bytes, str)):
        return [value]
    raise TypeError(f"input {name!r}: a tensor (or, for BYTES, a list of bytes or str), "
                    f"not {type(value).__name__}")


class Future:
    """The answer of one manypy.submit call, when it comes."""

    def __init__(self, handle, model):
        self._handle = handle
        self._model = model
        self._done = False
        self._outputs = None
        self._error = None

    def result(self):
        """Waits for the outputs (a dict of name -> tensor); raises the call's
        InferenceError."""
        if not self._done:
            try:
                self._outputs = _call("infer.wait", {"handle": self._handle})
            except InferenceError as e:
                self._error = e
            self._done = True
            for calls in _stack():
                if self in calls:
                    calls.remove(self)
        if self._error is not None:
            raise self._error
        return self._outputs

    def done(self):
        """Whether result() has returned (or raised) already."""
        return self._done

    def __repr__(self):
        state = "done" if self._done else "pending"
        return f"<manypy.Future {self._model!r} {state}>"


def submit(model, inputs, *, version=None, timeout=None, parameters=None):
    """Starts a call of `model` and returns its Future (see the module's doc)."""
    future = Future(_call("infer.submit", _request(model, inputs, version, timeout, parameters)),
                    model)
    _pending().append(future)
    return future


def _request(model, inputs, version, timeout, parameters):
    if not isinstance(inputs, dict):
        raise TypeError("manypy.infer: inputs must be a dict of input name -> tensor")
    return {
        "model": str(model),
        "version": "" if version is None else str(version),
        "inputs": {str(k): _as_value(k, v) for k, v in inputs.items()},
        "timeout": None if timeout is None else float(timeout),
        "parameters": dict(parameters or {}),
    }


def infer(model, inputs, *, version=None, timeout=None, parameters=None):
    """Runs `model` on `inputs` and returns its outputs (see the module's doc):
    one host call, the callee run by this very worker when it may."""
    return _call("infer.call", _request(model, inputs, version, timeout, parameters))


def _end():
    """The model runtime, as a model's call returns: waits for the calls it
    submitted and never waited for (their requests belong to its clients)."""
    stack = _stack()
    calls = stack.pop() if len(stack) > 1 else stack[0]
    models = getattr(_local, "models", None)
    if models:
        models.pop()
    for future in list(calls):
        try:
            future.result()
        except InferenceError:
            pass


# (load, sequence key) -> the sequence's state dict. The host names both
# (python_services.cc) and drops entries (_drop_states) as sequences end or
# time out, and all of a load's as the model leaves this interpreter.
_sequence_states = {}


def _drop_states(load, keys):
    """The model runtime: drops those sequences' states (keys None: every
    sequence of `load`)."""
    if keys is None:
        for key in [k for k in _sequence_states if k[0] == load]:
            del _sequence_states[key]
        return
    for key in keys:
        _sequence_states.pop((load, key), None)


class _Request:
    """manypy.request: the request the model is running now."""

    def _get(self, key):
        return _call("request", {})[key]

    @property
    def state(self):
        """The sequence's state (a dict kept between its requests), or None
        for a model without sequence_batching."""
        r = _call("request", {})
        if r["sequence"] is None:
            return None
        return _sequence_states.setdefault((r["load"], r["sequence"]), {})

    @property
    def sequence_id(self):
        """The request's sequence_id parameter (an int or a str), or None."""
        r = _call("request", {})
        return r["parameters"].get("sequence_id") if r["sequence"] is not None else None

    @property
    def id(self):
        return self._get("id")

    @property
    def parameters(self):
        return self._get("parameters")

    @property
    def seconds_left(self):
        return self._get("seconds_left")

    @property
    def client_left(self):
        return self._get("client_left")

    @property
    def trace_id(self):
        """The request's trace id (32 hex digits), or None when it is not traced."""
        return self._get("trace_id")

    def __repr__(self):
        try:
            r = _call("request", {})
        except InferenceError:
            return "<manypy.request: no request is running on this thread>"
        return (f"<manypy.request id={r['id']!r} parameters={r['parameters']!r} "
                f"seconds_left={r['seconds_left']!r} client_left={r['client_left']!r}>")


request = _Request()


class _Log:
    """manypy.log: lines in the server's log."""

    @staticmethod
    def _line(level, message, fields):
        _call("log", {"level": level, "message": str(message), "model": _current_model(),
                      "fields": {str(k): v if isinstance(v, (bool, int, float, str)) else repr(v)
                                 for k, v in fields.items()}})

    def verbose(self, message, **fields):
        self._line("verbose", message, fields)

    def info(self, message, **fields):
        self._line("info", message, fields)

    def warning(self, message, **fields):
        self._line("warning", message, fields)

    def error(self, message, **fields):
        self._line("error", message, fields)


log = _Log()


def _attribute(value):
    return value if isinstance(value, (bool, int, float, str)) else repr(value)


class _Span:
    """A block timed as a child span of the running request's span."""

    def __init__(self, name, attributes):
        self._name, self._attributes = str(name), attributes

    def __enter__(self):
        self._start = time.monotonic_ns()
        return self

    def set_attribute(self, key, value):
        self._attributes[str(key)] = value

    def __exit__(self, kind, error, tb):
        end = time.monotonic_ns()
        _call("trace", {"op": "span", "name": self._name, "start_ns": self._start, "end_ns": end,
                        "attributes": {str(k): _attribute(v) for k, v in self._attributes.items()},
                        "error": "" if kind is None else f"{kind.__name__}: {error}"})
        return False


class _Trace:
    """manypy.trace: the model's own spans and attributes in the request's trace."""

    @staticmethod
    def span(name, **attributes):
        return _Span(name, dict(attributes))

    @staticmethod
    def set_attribute(key, value):
        _call("trace", {"op": "attribute", "key": str(key), "value": _attribute(value)})


trace = _Trace()


class _Metric:
    """One metric a model declared (manypy.metrics.counter / gauge /
    histogram), or one label set of it: prometheus_client's methods."""

    def __init__(self, name, kind, labelnames, values=()):
        self._name, self._kind, self._labelnames, self._values = name, kind, labelnames, values

    def labels(self, *values, **by_name):
        """The child for these label values (by position or by name)."""
        if by_name:
            if values:
                raise ValueError("labels(): give values by position or by name, not both")
            missing = [n for n in self._labelnames if n not in by_name]
            extra = [n for n in by_name if n not in self._labelnames]
            if missing or extra:
                raise ValueError(f"metric {self._name!r} has labels {list(self._labelnames)}; "
                                 f"got {sorted(by_name)}")
            values = tuple(str(by_name[n]) for n in self._labelnames)
        if len(values) != len(self._labelnames):
            raise ValueError(f"metric {self._name!r} has {len(self._labelnames)} label(s) "
                             f"{list(self._labelnames)}, got {len(values)} value(s)")
        return _Metric(self._name, self._kind, self._labelnames, tuple(str(v) for v in values))

    def _update(self, op, value):
        if self._labelnames and not self._values:
            raise ValueError(f"metric {self._name!r} has labels {list(self._labelnames)}: "
                             f"call .labels(...) first")
        _call("metrics.update", {"name": self._name, "op": op, "value": float(value),
                                 "labels": list(self._values), "model": _current_model()})

    def inc(self, amount=1):
        self._update("inc", amount)

    def dec(self, amount=1):
        self._update("dec", amount)

    def set(self, value):
        self._update("set", value)

    def observe(self, value):
        self._update("observe", value)

    def __reduce__(self):  # a model keeping its metric pickles the declaration
        return (_declare, (self._kind, self._name, "", self._labelnames, None))

    def __repr__(self):
        return f"<manypy.metrics.{self._kind} {self._name!r}>"


def _declare(kind, name, documentation, labelnames=(), buckets=None):
    labelnames = tuple(labelnames)
    try:
        _call("metrics.declare", {"name": name, "help": documentation, "kind": kind,
                                  "labels": list(labelnames),
                                  "buckets": None if buckets is None else [float(b) for b in buckets]})
    except InferenceError as e:
        if e.status == "INVALID_ARGUMENT":
            raise ValueError(e.message) from None
        raise
    return _Metric(name, kind, labelnames)


class _Metrics:
    """manypy.metrics: a model's own metrics on the server's /metrics, each
    sample labelled with its model and version. Invalid names, and a name
    declared again as another kind or with other labels, raise ValueError."""

    @staticmethod
    def counter(name, documentation, labelnames=(), labels=None):
        return _declare("counter", name, documentation, labels if labels is not None else labelnames)

    @staticmethod
    def gauge(name, documentation, labelnames=(), labels=None):
        return _declare("gauge", name, documentation, labels if labels is not None else labelnames)

    @staticmethod
    def histogram(name, documentation, labelnames=(), labels=None, buckets=None):
        return _declare("histogram", name, documentation,
                        labels if labels is not None else labelnames, buckets)


metrics = _Metrics()
