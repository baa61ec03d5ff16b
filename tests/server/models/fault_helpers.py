"""A helper module of the fault models (interned into their archives beside
fault_models.py): errors raised two calls deep in a model's own code, which
the server's messages must trace back to this file and line."""


def check_input(x):
    return _require_positive(x)


def _require_positive(x):
    if bool((x < 0).any()):
        raise ValueError(f"negative input to raises_in_helper: {x.tolist()}")
    return x


def check_state(state):
    return _require_weights(state)


def _require_weights(state):
    raise KeyError("fails_in_helper: the state has no 'table' entry")
