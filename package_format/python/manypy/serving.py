"""manypy.infer, submit, request and log outside manypy-server.

Inside the server, a model's `import manypy` gets the server's own module
(server/core/manypy_module.py: nested calls, the running request, the
server's log). Here, where a model is packaged or tried eagerly, the same
names exist so that its code imports and runs: there is no other model to
call (infer and submit raise InferenceError UNAVAILABLE saying so), no
request (request.parameters is {}, seconds_left None, client_left False,
trace_id None; trace.span and trace.set_attribute record nothing),
log lines go to Python's logging ("manypy.model"), and metrics keep their
values here (`value()` reads them back, for a model's own tests) after the
same checks the server makes.
"""
import logging

__all__ = ["InferenceError", "Future", "infer", "submit", "request", "log", "metrics", "trace"]

_logger = logging.getLogger("manypy.model")


class InferenceError(Exception):
    """As the server's: `status` (a status code name) and `message`."""

    def __init__(self, status, message):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Future:
    def __init__(self, error):
        self._error = error

    def result(self):
        raise self._error

    def done(self):
        return True


def submit(model, inputs, *, version=None, timeout=None, parameters=None):
    return Future(InferenceError(
        "UNAVAILABLE", f"manypy.infer('{model}') runs another model inside manypy-server; "
        f"outside it (packaging, an eager test) there is no other model. Package a model that "
        f"calls others with inputs= and outputs= rather than example_inputs"))


def infer(model, inputs, *, version=None, timeout=None, parameters=None):
    return submit(model, inputs, version=version, timeout=timeout, parameters=parameters).result()


class _Request:
    id = ""
    parameters = {}
    seconds_left = None
    client_left = False
    state = None  # no sequence outside the server: each call stands alone
    sequence_id = None
    trace_id = None  # no trace outside the server


request = _Request()


class _Span:
    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        return False

    def set_attribute(self, key, value):
        pass


class _Trace:
    """Outside the server nothing is traced: spans and attributes go nowhere."""

    @staticmethod
    def span(name, **attributes):
        return _Span()

    @staticmethod
    def set_attribute(key, value):
        pass


trace = _Trace()


class _Log:
    @staticmethod
    def _line(level, message, fields):
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        _logger.log(level, f"{message} {extra}".rstrip())

    def verbose(self, message, **fields):
        self._line(logging.DEBUG, message, fields)

    def info(self, message, **fields):
        self._line(logging.INFO, message, fields)

    def warning(self, message, **fields):
        self._line(logging.WARNING, message, fields)

    def error(self, message, **fields):
        self._line(logging.ERROR, message, fields)


log = _Log()


_METRIC_NAME = __import__("re").compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = __import__("re").compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")
_declared = {}


class _Metric:
    def __init__(self, name, kind, labelnames, values=()):
        self._name, self._kind, self._labelnames, self._values = name, kind, labelnames, values
        self._samples = {} if not values else None

    def labels(self, *values, **by_name):
        if by_name:
            values = tuple(str(by_name[n]) for n in self._labelnames)
        if len(values) != len(self._labelnames):
            raise ValueError(f"metric {self._name!r} has {len(self._labelnames)} label(s)")
        child = _Metric(self._name, self._kind, self._labelnames, tuple(str(v) for v in values))
        child._parent = self
        return child

    def _update(self, op, value):
        if self._labelnames and not self._values:
            raise ValueError(f"metric {self._name!r} has labels: call .labels(...) first")
        root = getattr(self, "_parent", self)
        current = root._samples.get(self._values, [] if self._kind == "histogram" else 0.0)
        if op == "inc":
            if self._kind == "counter" and value < 0:
                raise ValueError(f"counter {self._name!r} cannot go down")
            current += value
        elif op == "dec":
            current -= value
        elif op == "set":
            current = value
        else:
            current = current + [value]
        root._samples[self._values] = current

    def inc(self, amount=1):
        self._update("inc", amount)

    def dec(self, amount=1):
        self._update("dec", amount)

    def set(self, value):
        self._update("set", value)

    def observe(self, value):
        self._update("observe", value)

    def value(self, *values):
        """The value kept for these label values (a histogram's observations)."""
        return getattr(self, "_parent", self)._samples.get(tuple(str(v) for v in values))


def _declare(kind, name, documentation, labelnames=(), buckets=None):
    labelnames = tuple(labelnames)
    if not _METRIC_NAME.match(name) or name.startswith("manypy_"):
        raise ValueError(f"metric name {name!r} is not [a-zA-Z_:][a-zA-Z0-9_:]* (nor manypy_...)")
    for label in labelnames:
        if not _LABEL_NAME.match(label) or label.startswith("__") or label in ("model", "version"):
            raise ValueError(f"metric {name!r}: label name {label!r} is not allowed")
    known = _declared.get(name)
    if known is not None:
        if known._kind != kind or known._labelnames != labelnames:
            raise ValueError(f"metric {name!r} is declared already as a {known._kind} with "
                             f"labels {list(known._labelnames)}")
        return known
    metric = _declared[name] = _Metric(name, kind, labelnames)
    return metric


class _Metrics:
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


# What the server's runtime tells its `manypy` module (which call runs on
# which thread); nothing to track here. The load check (load_check_child.py)
# gives this module to the runtime in the server's place.
def _enter(model):
    pass


def _begin(model):
    pass


def _end():
    pass
