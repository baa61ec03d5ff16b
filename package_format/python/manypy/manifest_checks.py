"""The checks every manifest field goes through, each failing with a
ValueError whose message starts with the field at fault (``inputs[1].datatype:
...``), as manifest.py and manifest_tensors.py report them. Plain Python, no
state: safe from any thread.
"""


def fail(field, message):
    raise ValueError(f"{field}: {message}")


def is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def check_keys(obj, allowed, field):
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        where = f"{field}." if field else ""
        fail(f"{where}{unknown[0]}", "unknown field (allowed: %s)" % ", ".join(allowed))


def check_string(value, field, pattern=None, what="a string"):
    if not isinstance(value, str):
        fail(field, f"must be {what}, got {type(value).__name__} {value!r}")
    if pattern is not None and not pattern.match(value):
        fail(field, f"invalid value {value!r} (must match {pattern.pattern})")


def check_int(value, field, lo=None, hi=None):
    if not is_int(value):
        fail(field, f"must be an integer, got {type(value).__name__} {value!r}")
    if lo is not None and value < lo:
        fail(field, f"must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        fail(field, f"must be <= {hi}, got {value}")
