# The outputs a model's result gives, in manifest order: by dict key, tuple
# position or NAME__<index> suffix (the packager infers signatures by the same
# rule). Plain Python.
import re

from manypy_model_runtime.errors import ModelOutputError

_INDEX_SUFFIX = re.compile(r"__([0-9]+)$")


def _is_bytes_list(value):
    return isinstance(value, list) and all(
        isinstance(v, (bytes, bytearray, str)) or _is_bytes_list(v) for v in value)


def _as_output_list(result, output_names):
    """The declared outputs, in manifest order, from what the model returned:
    a dict (by key; also a list or tuple holding one dict, as torchvision's
    detectors return), a tuple or list (by position, or by the NAME__<index>
    suffix when the manifest declares fewer outputs than the result has
    elements: elements that were None at export are not declared), or one
    value. A declared output that is None is an error naming it."""
    if isinstance(result, (tuple, list)) and result and all(isinstance(r, dict) for r in result):
        if len(result) != 1:
            raise ModelOutputError(
                f"the model returned a {type(result).__name__} of {len(result)} dicts; the "
                f"manifest's outputs {output_names} are read from one dict (one input item per call)")
        result = result[0]
    if isinstance(result, dict):
        missing = [n for n in output_names if n not in result]
        if missing:
            raise ModelOutputError(f"the model's result has no output(s) {missing}; it returned "
                                   f"keys {sorted(result)}")
        values = [result[n] for n in output_names]
    elif isinstance(result, (tuple, list)) and not (len(output_names) == 1 and _is_bytes_list(result)):
        if len(result) == len(output_names):
            values = list(result)
        else:
            positions = []
            for n in output_names:
                m = _INDEX_SUFFIX.search(n)
                positions.append(int(m.group(1)) if m else None)
            if any(p is None or p >= len(result) for p in positions):
                raise ModelOutputError(
                    f"the model returned {len(result)} values, the manifest declares "
                    f"{len(output_names)} outputs {output_names} (an output named NAME__<index> "
                    f"takes that element)")
            values = [result[p] for p in positions]
    else:
        if len(output_names) != 1:
            raise ModelOutputError(f"the model returned one value, the manifest declares "
                                   f"{len(output_names)} outputs {output_names}")
        values = [result]
    for name, value in zip(output_names, values):
        if value is None:
            raise ModelOutputError(f"output '{name}' is None: the model returned None where "
                                   f"its manifest declares a tensor")
    return values
