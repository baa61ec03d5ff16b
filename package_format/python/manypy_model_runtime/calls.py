# Calling a loaded model as the server does: inputs in manifest order, under
# inference mode, outputs back in manifest order, a streaming model one
# response at a time; the server's `manypy` module told which model runs; and
# an os._exit by a model logged before the process ends.
import collections.abc
import sys
import weakref

import torch

from manypy_model_runtime.compiled import (_compiled, _mark_batch_dynamic, _recompiles,
                                           _report_recompiles, is_compiled)
from manypy_model_runtime.errors import ModelOutputError
from manypy_model_runtime.outputs import _as_output_list

# The model each interpreter is running now (one call at a time per
# interpreter), and every loaded model's name: for the os._exit log line.
_running = None
_names = weakref.WeakKeyDictionary()  # does not keep an unloaded model alive
_server_pid = None


def _log_line(message, model):
    """One ERROR line as the server's log writes it (server/log.cc): text, or
    with --log-format=json (which manypy-server puts in MANYPY_LOG_FORMAT
    before the interpreters start) one JSON object with the model's name."""
    import os
    if os.environ.get("MANYPY_LOG_FORMAT") != "json":
        return f"manypy-server: ERROR {message}\n"
    import datetime
    import json
    now = datetime.datetime.now(datetime.timezone.utc)
    ts = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"
    return json.dumps({"ts": ts, "level": "ERROR", "msg": message, "model": model}) + "\n"


def _guard_os_exit():
    """Wraps this interpreter's os._exit so that a model calling it leaves one
    clear line on stderr before the process ends, instead of a server that
    silently vanishes. It still exits: os._exit promises no return, code after
    it assumes none, and it is how a forked child (multiprocessing, a
    DataLoader worker) ends without running the server's cleanup; refusing it
    there would leave a second copy of the server running. A forked child
    exits silently."""
    global _server_pid
    if _server_pid is not None:
        return
    import os
    import sys
    _server_pid = os.getpid()
    real_exit = os._exit

    def _exit(status):
        if os.getpid() == _server_pid:
            where = ""
            frame = sys._getframe(1)
            if frame is not None:
                where = f" at {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
            try:
                model = _names.get(_running, "?")
            except TypeError:  # not weakly referenceable, or nothing running
                model = "?"
            try:
                sys.stderr.write(_log_line(
                    f"model '{model}' called os._exit({status}){where}: the server process "
                    f"exits now, and every request in flight is lost", model))
                sys.stderr.flush()
            except Exception:  # the exit matters more than the line
                pass
        real_exit(status)

    os._exit = _exit



def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


# The module that stands in for the server's `manypy` where there is no
# server (the packager's load check sets it); None: sys.modules' "manypy".
api_override = None


def _serving_api():
    """The server's `manypy` module (server/core/manypy_module.py), or None
    where the host defines none (the interpreter layer's own tests)."""
    api = api_override if api_override is not None else sys.modules.get("manypy")
    return api if hasattr(api, "_begin") else None


def drop_sequence_states(load, keys):
    """Drops the per-sequence states (manypy.request.state) of the model load
    `load` named by `keys` (None: all of that load's), as sequences end, time
    out, or the model is released from this interpreter."""
    api = _serving_api()
    if api is not None and hasattr(api, "_drop_states"):
        api._drop_states(load, keys)


def _enter(model):
    """A call of `model` starts on this thread: the server's module learns
    which model its calls and log lines come from."""
    api = _serving_api()
    if api is not None:
        try:
            api._begin(_names.get(model, "?"))
        except TypeError:  # not weakly referenceable
            api._begin("?")
    return api


def _leave(api):
    # Calls it submitted and never waited for belong to its clients: wait now.
    if api is not None:
        api._end()


def infer(model, method, output_names, device, batched, inputs):
    """Calls the model with the inputs in manifest order and returns the
    outputs as a list in manifest order (on the CPU). `batched`: the inputs'
    first dimension is the batch."""
    global _running
    call = model if not method or method == "forward" else getattr(model, method)
    if device != "cpu":
        inputs = [_to(i, device) for i in inputs]
    compiled = _compiled and is_compiled(model)
    if compiled:
        recompiled_before = len(_recompiles)
        if batched:
            _mark_batch_dynamic(inputs)
    _running = model
    api = _enter(model)
    try:
        if torch.is_inference_mode_enabled():  # a nested call: its caller's mode holds
            result = call(*inputs)
        else:
            with torch.inference_mode():
                result = call(*inputs)
    finally:
        _running = None
        _leave(api)
        if compiled and len(_recompiles) > recompiled_before:
            _report_recompiles(recompiled_before)
    outputs = _as_output_list(result, output_names)
    if device != "cpu":
        outputs = [_to(o, "cpu") for o in outputs]
    return outputs


def call_as_running(model, work):
    """work() as a call of `model` under inference mode, the server's
    module told which model runs (continuous batching's start and step)."""
    global _running
    _running = model
    api = _enter(model)
    try:
        with torch.inference_mode():
            return work()
    finally:
        _running = None
        _leave(api)


def _is_stream(result):
    return isinstance(result, collections.abc.Iterator) and not isinstance(result, torch.Tensor)


class Stream:
    """One request to a streaming model: its generator (or iterator), read
    one response at a time by the worker that runs it. The call lasts from
    the first call to the stream's end (or close): the calls it submits
    (manypy.submit) may be waited for across its yields."""

    def __init__(self, model, method, output_names, device, batched, inputs):
        global _running
        call = model if not method or method == "forward" else getattr(model, method)
        if device != "cpu":
            inputs = [_to(i, device) for i in inputs]
        self._model = model
        self._output_names = output_names
        self._device = device
        self._responses = None
        _running = model
        self._api = _enter(model)
        try:
            with torch.inference_mode():
                result = call(*inputs)
            if not _is_stream(result):
                raise ModelOutputError(
                    f"the manifest says the model streams, but it returned a "
                    f"{type(result).__name__} (a streaming model's method is a generator or "
                    f"returns an iterator)")
        except BaseException:
            self._end()
            raise
        finally:
            _running = None
        self._responses = result

    def _end(self):
        api, self._api = self._api, None
        _leave(api)

    def next(self):
        """The next response's outputs in manifest order (on the CPU), or
        None when the stream has ended."""
        global _running
        _running = self._model
        try:
            with torch.inference_mode():
                response = next(self._responses)
        except StopIteration:
            self._end()
            return None
        except BaseException:
            self._end()
            raise
        finally:
            _running = None
        outputs = _as_output_list(response, self._output_names)
        if self._device != "cpu":
            outputs = [_to(o, "cpu") for o in outputs]
        return outputs

    def close(self):
        """Ends the stream early (the client left): a generator gets
        GeneratorExit at its yield and runs its finally blocks."""
        close = getattr(self._responses, "close", None)
        try:
            if close is not None:
                with torch.inference_mode():
                    close()
        finally:
            self._end()


def start_stream(model, method, output_names, device, batched, inputs):
    """Calls a streaming model with the inputs in manifest order: its Stream."""
    return Stream(model, method, output_names, device, batched, inputs)
