# Continuous (iteration-level) batching of a streaming model: the model opts in
# with `continuous_batching = N` and two methods, `start(*inputs) -> state` (one
# request) and `step(states) -> (responses, finished)` (every running request
# advanced by one response). The server's running batch
# (server/inference/dispatcher_batch.cc) drives one Batch per interpreter;
# docs/text-generation.md is the reference.
from manypy_model_runtime.calls import _to, call_as_running
from manypy_model_runtime.errors import ModelOutputError
from manypy_model_runtime.outputs import _as_output_list


def batch_size(model):
    """The model's `continuous_batching`: how many requests one step may
    advance (0: the model does not opt in). A value that is not an int >= 0,
    or an opt-in without start and step methods, is refused naming it."""
    n = getattr(model, "continuous_batching", 0)
    if n is None or n is False:
        return 0
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"continuous_batching must be an int >= 0 (the most requests one step "
                         f"advances), got {n!r}")
    if n == 0:
        return 0
    for name in ("start", "step"):
        if not callable(getattr(model, name, None)):
            raise ValueError(f"the model sets continuous_batching = {n} but has no {name}() "
                             f"method (continuous batching calls start(*inputs) per request and "
                             f"step(states) per step)")
    return n


def _error(e):
    return f"{type(e).__qualname__}: {e}"


def _check_step(result, count):
    """step's (responses, finished), each a sequence of `count` entries."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise ModelOutputError(f"step(states) must return (responses, finished), got "
                               f"{type(result).__name__}")
    responses, finished = result
    responses, finished = list(responses), list(finished)
    if len(responses) != count or len(finished) != count:
        raise ModelOutputError(f"step(states) was given {count} states but returned "
                               f"{len(responses)} responses and {len(finished)} finished flags "
                               f"(one of each per state, in the states' order)")
    return responses, finished


class Batch:
    """One interpreter's running batch of one model: its requests' states by
    the server's key. Called by one worker at a time (the slot's)."""

    def __init__(self, model, method, output_names, device, batched):
        self._model = model
        self._output_names = output_names
        self._device = device
        self._states = {}

    def start(self, key, inputs):
        """A request joins: its state from start(*inputs) (inputs in manifest order)."""
        if self._device != "cpu":
            inputs = [_to(i, self._device) for i in inputs]
        self._states[key] = call_as_running(self._model, lambda: self._model.start(*inputs))

    def _outputs(self, response):
        outputs = _as_output_list(response, self._output_names)
        if self._device != "cpu":
            outputs = [_to(o, "cpu") for o in outputs]
        return outputs

    def step(self, keys):
        """Advances the states of `keys` by one step. One [outputs or None,
        finished, error or None] per key, in order. An exception naming states
        (an attribute `states`: a list of them) fails those alone; any other
        exception propagates (it fails the whole step)."""
        states = [self._states[k] for k in keys]
        try:
            result = call_as_running(self._model, lambda: self._model.step(states))
        except Exception as e:
            named = getattr(e, "states", None)
            if not isinstance(named, (list, tuple)) or not named:
                raise
            failed = {id(s) for s in named}
            if not failed & {id(s) for s in states}:
                raise
            return [[None, False, _error(e) if id(s) in failed else None] for s in states]
        responses, finished = _check_step(result, len(states))
        out = []
        for response, done in zip(responses, finished):
            try:
                outputs = None if response is None else self._outputs(response)
                out.append([outputs, bool(done), None])
            except Exception as e:  # only this state's response is wrong
                out.append([None, True, _error(e)])
        return out

    def drop(self, keys):
        """The requests left (finished, failed, cancelled): their states go."""
        for k in keys:
            self._states.pop(k, None)


def start_batch(model, method, output_names, device, batched):
    """The running batch of a model that opts in (batch_size > 0), for one interpreter."""
    return Batch(model, method, output_names, device, batched)
