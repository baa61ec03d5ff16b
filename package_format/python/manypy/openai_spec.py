"""A manifest's `openai` field (docs/text-generation.md): the OpenAI routes a
model serves, which model input each request field fills and which output
carries each piece of the answer, checked against the model's signature.

The same rules as package_format/openai_spec.cc (the server checks them again
when it reads the archive). Plain Python, no torch import. Errors are
ValueErrors whose message starts with the field at fault, ``openai.inputs.max_tokens: ...``.
"""

COMPLETIONS, CHAT, EMBEDDINGS = "completions", "chat/completions", "embeddings"
ROUTES = (COMPLETIONS, CHAT, EMBEDDINGS)

# field -> (datatypes, rank without the batch dimension, routes that need it)
INPUT_RULES = {
    "prompt": (("BYTES",), 1, (COMPLETIONS,)),
    "messages": (("BYTES",), 1, (CHAT,)),
    "input": (("BYTES",), 1, (EMBEDDINGS,)),
    "max_tokens": (("INT32", "INT64"), 1, ()),
    "temperature": (("FP32", "FP64"), 1, ()),
    "top_p": (("FP32", "FP64"), 1, ()),
    "stop": (("BYTES",), 1, ()),
    "seed": (("INT64",), 1, ()),
}
OUTPUT_RULES = {
    "text": (("BYTES",), 1, (COMPLETIONS, CHAT)),
    "finish_reason": (("BYTES",), 1, ()),
    "completion_tokens": (("INT32", "INT64"), 1, ()),
    "prompt_tokens": (("INT32", "INT64"), 1, ()),
    "embedding": (("FP16", "FP32", "FP64"), 2, (EMBEDDINGS,)),
}


def _fail(field, message):
    raise ValueError(f"openai.{field}: {message}")


def _join(items, last):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {last} " + items[-1]


def _check_side(routes, kind, key, rules, mapping, tensors):
    if not isinstance(mapping, dict):
        _fail(key, f"must be an object of field -> {kind} name, got {mapping!r}")
    by_name = {t["name"]: t for t in tensors}
    used = set()
    for field in sorted(mapping):
        tensor = mapping[field]
        path = f"{key}.{field}"
        if field not in rules:
            _fail(path, f"unknown field (expected one of {_join(rules, 'or')})")
        datatypes, rank, needed_by = rules[field]
        route = next((r for r in routes if r in needed_by), routes[0])
        if not isinstance(tensor, str):
            _fail(path, f"expected a tensor name, got {tensor!r}")
        if tensor not in by_name:
            _fail(path, f"route '{route}': '{tensor}' is not an {kind} of the model "
                  f"(its {kind}s: {_join(by_name, 'and')})")
        if tensor in used:
            _fail(path, f"route '{route}': {kind} '{tensor}' is mapped twice")
        used.add(tensor)
        spec = by_name[tensor]
        if spec["datatype"] not in datatypes:
            _fail(path, f"route '{route}': {kind} '{tensor}' is {spec['datatype']}, "
                  f"expected {_join(datatypes, 'or')}")
        if len(spec["shape"]) != rank:
            _fail(path, f"route '{route}': {kind} '{tensor}' has {len(spec['shape'])} "
                  f"dimensions, expected {rank} (without the batch dimension)")
    for route in routes:
        for field, (_, _, needed_by) in rules.items():
            if route in needed_by and field not in mapping:
                _fail(f"{key}.{field}", f"route '{route}' needs the {kind} '{field}' mapped")


def validate(openai, inputs, outputs):
    """Checks an `openai` dict against the model's `inputs` and `outputs`
    (manifest tensor dicts, shapes without the batch dimension)."""
    if not isinstance(openai, dict):
        raise ValueError(f"openai: must be an object with routes, inputs and outputs, got {openai!r}")
    unknown = sorted(set(openai) - {"routes", "inputs", "outputs"})
    if unknown:
        _fail(unknown[0], "unknown field (expected one of routes, inputs, outputs)")
    for key in ("routes", "inputs", "outputs"):
        if key not in openai:
            _fail(key, "required field missing")
    routes = openai["routes"]
    if not isinstance(routes, list) or not routes:
        _fail("routes", f"must name at least one route ({_join(ROUTES, 'or')}), got {routes!r}")
    for i, route in enumerate(routes):
        if route not in ROUTES:
            _fail(f"routes[{i}]", f"unknown route {route!r} (expected {_join(ROUTES, 'or')})")
        if route in routes[:i]:
            _fail(f"routes[{i}]", f"route '{route}' is listed twice")
    _check_side(routes, "input", "inputs", INPUT_RULES, openai["inputs"], inputs)
    _check_side(routes, "output", "outputs", OUTPUT_RULES, openai["outputs"], outputs)
    mapped = set(openai["inputs"].values())
    for t in inputs:
        if t["name"] not in mapped:
            _fail("inputs", f"route '{routes[0]}': the model's input '{t['name']}' is mapped "
                  "to no request field")
    return openai


def normalize(openai):
    """export()'s `openai` argument as the manifest stores it (None: no routes):
    routes as a list, the maps as plain dicts sorted by field."""
    if openai is None:
        return None
    if not isinstance(openai, dict):
        raise ValueError(f"openai: must be a dict with routes, inputs and outputs, got {openai!r}")
    out = dict(openai)
    if isinstance(out.get("routes"), (tuple, str)):
        out["routes"] = [out["routes"]] if isinstance(out["routes"], str) else list(out["routes"])
    for key in ("inputs", "outputs"):
        if isinstance(out.get(key), dict):
            out[key] = {k: out[key][k] for k in sorted(out[key])}
    return out
