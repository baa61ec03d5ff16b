"""manypy.infer, submit, request and log outside manypy-server.

Inside the server, a model's `import manypy` gets the server's own module
(server/core/manypy_module.py: nested calls, the running request, the
server's log). Here, where a model is packaged or tried eagerly, the same
names exist so that its code imports and runs: there is no other model to
call (infer and submit raise InferenceError UNAVAILABLE saying so), no
request (request.parameters is {}, seconds_left None, client_left False),
and log lines go to Python's logging ("manypy.model").
"""
import logging

__all__ = ["InferenceError", "Future", "infer", "submit", "request", "log"]

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


request = _Request()


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


# What the server's runtime tells its `manypy` module (which call runs on
# which thread); nothing to track here. The load check (load_check_child.py)
# gives this module to the runtime in the server's place.
def _enter(model):
    pass


def _begin(model):
    pass


def _end():
    pass
