"""A model's signature from example runs: each example is run once under
torch.inference_mode() and its inputs and outputs give the manifest's
inputs and outputs (or check the declared ones); dimensions that differ
between examples become -1, outputs that are None are left out, and a model
that yields its responses streams."""

import collections.abc
import inspect
import itertools
import warnings

import torch

from . import manifest as _manifest
from .value_specs import (as_args, check_declared, output_index, split_outputs, strip_batch,
                          value_spec)


def _merge_shapes(shapes, field):
    """One shape for several examples' shapes: dimensions that differ, or
    that are 0 in some example (the schema has no 0), become -1."""
    if any(len(s) != len(shapes[0]) for s in shapes):
        raise ValueError(f"{field}: the examples give different ranks {shapes}")
    return [d if d != 0 and all(s[j] == d for s in shapes) else -1
            for j, d in enumerate(shapes[0])]


def _run_example(call, args, max_batch_size, outputs, where):
    """Runs one example: (input specs [(datatype, shape)], the result, and
    [(key, datatype, shape)] per output element; datatype and shape are None
    for an element that is None)."""
    batch = None
    arg_specs = []
    for i, value in enumerate(args):
        datatype, shape = value_spec(value, f"{where}[{i}]")
        if max_batch_size > 0 and shape:
            batch = shape[0] if batch is None else batch
        arg_specs.append((datatype, strip_batch(shape, max_batch_size, batch, f"{where}[{i}]")))
    with torch.inference_mode():
        result = call(*args)
        responses = _first_responses(result, where) if _is_stream(result) else [result]
    if result is None:
        raise ValueError(f"outputs: the model returned None for {where}; there is nothing to serve")
    # A stream's responses share one signature: dimensions that differ
    # between them (a text piece's length) become -1.
    per_response = []
    for n, response in enumerate(responses):
        found = []
        at = where if len(responses) == 1 else f"{where}, response {n}"
        for i, (key, value) in enumerate(split_outputs(response, outputs)):
            if value is None:
                found.append((key, None, None))
                continue
            field = f"output {key!r}" if key is not None else f"output {i}"
            datatype, shape = value_spec(value, f"{field} ({at})")
            found.append((key, datatype, strip_batch(shape, max_batch_size, batch, field)))
        per_response.append(found)
    return arg_specs, responses[0], _merge_responses(per_response, where), _is_stream(result)


# How many responses of a streaming model's example are read for its signature.
_EXAMPLE_RESPONSES = 16


def _is_stream(result):
    """Whether a model's result is a stream of responses (a generator or
    another iterator; a tensor is iterable but not an iterator)."""
    return isinstance(result, collections.abc.Iterator) and not isinstance(result, torch.Tensor)


def _first_responses(stream, where):
    """Up to _EXAMPLE_RESPONSES values the stream yields (then closes it)."""
    try:
        responses = list(itertools.islice(stream, _EXAMPLE_RESPONSES))
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
    if not responses:
        raise ValueError(f"outputs: the streaming model yielded nothing for {where}; there is "
                         f"nothing to serve")
    return responses


def _merge_responses(per_response, where):
    """One [(key, datatype, shape)] for all of a stream's responses."""
    first = per_response[0]
    merged = []
    for i, (key, datatype, shape) in enumerate(first):
        values = [r[i] for r in per_response if i < len(r)]
        if len(values) != len(per_response) or any(v[0] != key for v in values):
            raise ValueError(f"outputs: the streaming model's responses for {where} hold "
                             f"different outputs ({[[k for k, _, _ in r] for r in per_response]})")
        if any(v[1] is None for v in values):
            merged.append((key, None, None))
            continue
        datatypes = {v[1] for v in values}
        field = f"output {key!r}" if key is not None else f"output {i}"
        if len(datatypes) > 1:
            raise ValueError(f"{field}: the responses for {where} give datatypes {sorted(datatypes)}")
        merged.append((key, datatype, _merge_shapes([v[2] for v in values], field)))
    return merged


def streaming_of(model, method, streamed, streaming):
    """The manifest's `streaming`: as given, else whether the examples
    streamed or the method is a generator function."""
    if streaming is not None:
        return bool(streaming)
    if streamed:
        return True
    if model is None:
        return False
    call = getattr(model, method or "forward", None)
    return inspect.isgeneratorfunction(call)


def _apply_dynamic_dims(dynamic_dims, inputs, outputs):
    """Marks the named tensors' dimensions -1 (variable). dynamic_dims maps a
    tensor name to dimension indices, batch dimension excluded."""
    specs = {s["name"]: s for s in list(inputs) + list(outputs)}
    for name, dims in dynamic_dims.items():
        spec = specs.get(name)
        if spec is None:
            raise ValueError(f"dynamic_dims: no input or output named {name!r} (inputs "
                             f"{[s['name'] for s in inputs]}, outputs {[s['name'] for s in outputs]})")
        for d in ([dims] if isinstance(dims, int) else list(dims)):
            if not isinstance(d, int) or not 0 <= d < len(spec["shape"]):
                raise ValueError(f"dynamic_dims[{name!r}]: dimension {d!r} is not in 0.."
                                 f"{len(spec['shape']) - 1} (its shape is {spec['shape']}, "
                                 f"batch dimension excluded)")
            spec["shape"][d] = -1


def resolve_signature(model, inputs, outputs, example_inputs, max_batch_size, method,
                      more_example_inputs=None, dynamic_dims=None, results=None):
    """Returns (inputs, outputs, streamed) as normalized spec lists (and
    whether the model streamed its responses for the examples), running the
    examples (if any) to infer or check them: dimensions that differ between
    examples become -1, as do those dynamic_dims names; outputs that are None
    for an example are left out (with a warning). Each example's result is
    appended to the list `results`, when given."""
    if inputs is not None:
        inputs = _manifest.tensor_specs(inputs, "inputs")
    if outputs is not None:
        outputs = _manifest.tensor_specs(outputs, "outputs")
    if example_inputs is None:
        if more_example_inputs:
            raise ValueError("more_example_inputs: needs example_inputs too")
        if inputs is None:
            raise ValueError("inputs: required unless example_inputs is given")
        if outputs is None:
            raise ValueError("outputs: required unless example_inputs is given "
                             "(then they are inferred from one run)")
        if dynamic_dims:
            _apply_dynamic_dims(dynamic_dims, inputs, outputs)
        return inputs, outputs, False

    call = getattr(model, method) if method else model
    examples = [as_args(example_inputs)] + [as_args(e) for e in (more_example_inputs or [])]
    runs = []
    for n, args in enumerate(examples):
        where = "example_inputs" if n == 0 else f"more_example_inputs[{n - 1}]"
        if len(args) != len(examples[0]):
            raise ValueError(f"{where}: {len(args)} arguments, example_inputs has {len(examples[0])}")
        if inputs is not None:
            if len(inputs) != len(args):
                raise ValueError(f"inputs: {len(inputs)} declared but {where} has {len(args)}")
        runs.append(_run_example(call, args, max_batch_size, outputs, where))
        if results is not None:
            results.append(runs[-1][1])

    # Inputs: one spec per position, shapes merged over the examples.
    arg_specs = []
    for i in range(len(examples[0])):
        datatypes = {run[0][i][0] for run in runs}
        if len(datatypes) > 1:
            raise ValueError(f"inputs[{i}]: the examples give datatypes {sorted(datatypes)}")
        arg_specs.append((datatypes.pop(), _merge_shapes([run[0][i][1] for run in runs], f"inputs[{i}]")))
    if inputs is None:
        inputs = [{"name": f"INPUT__{i}", "datatype": d, "shape": s} for i, (d, s) in enumerate(arg_specs)]
    else:
        for run in runs:
            for i, (spec, (datatype, shape)) in enumerate(zip(inputs, run[0])):
                check_declared(f"inputs[{i}]", spec, datatype, shape,
                               "example input is", "example input has")

    # Outputs: the same elements in every example; None in any example = left out.
    is_dict = isinstance(runs[0][1], dict) or (
        isinstance(runs[0][1], (tuple, list)) and len(runs[0][1]) == 1 and isinstance(runs[0][1][0], dict))
    keys = [k for k, _, _ in runs[0][2]]
    for run in runs[1:]:
        if [k for k, _, _ in run[2]] != keys:
            raise ValueError(f"outputs: the examples return different outputs "
                             f"({len(keys)} vs {len(run[2])}: {keys} vs {[k for k, _, _ in run[2]]})")
    merged = []  # (position, key, datatype or None, shape or None)
    for i, key in enumerate(keys):
        field = f"output {key!r}" if key is not None else f"output {i}"
        values = [run[2][i] for run in runs]
        if any(d is None for _, d, _ in values):
            merged.append((i, key, None, None))
            continue
        datatypes = {d for _, d, _ in values}
        if len(datatypes) > 1:
            raise ValueError(f"{field}: the examples give datatypes {sorted(datatypes)}")
        merged.append((i, key, datatypes.pop(), _merge_shapes([s for _, _, s in values], field)))
    if all(d is None for _, _, d, _ in merged):
        raise ValueError("outputs: every output the model returned is None for the examples; "
                         "there is nothing to serve")

    def name_of(i, key):
        return key if key is not None else f"OUTPUT__{i}"

    if outputs is None:
        dropped = [name_of(i, k) for i, k, d, _ in merged if d is None]
        specs = [{"name": name_of(i, k), "datatype": d, "shape": s} for i, k, d, s in merged if d is not None]
        if dropped:
            _warn_none_outputs(dropped, [s["name"] for s in specs])
        outputs = _manifest.tensor_specs(specs, "outputs")
    else:
        for run in runs:
            _check_declared_outputs(outputs, run[2], is_dict)
    if dynamic_dims:
        _apply_dynamic_dims(dynamic_dims, inputs, outputs)
    return inputs, outputs, any(run[3] for run in runs)


def _warn_none_outputs(dropped, kept):
    warnings.warn(f"output(s) {dropped} are None for the example inputs: left out of the "
                  f"signature; the server serves {kept} (a None in a served output at serving "
                  f"time is a model error)", stacklevel=4)


def _check_declared_outputs(outputs, found, is_dict):
    """Checks one example's outputs against the declared ones (by key for a
    dict; by position, or by NAME__<index>, for a tuple or list)."""
    none_hint = ("leave it out of outputs (an output that is None for the examples is not "
                 "served)")
    if is_dict:
        got = {k for k, d, _ in found if d is not None}
        nones = {k for k, d, _ in found if d is None}
        want = {o["name"] for o in outputs}
        for i, o in enumerate(outputs):
            if o["name"] in nones:
                raise ValueError(f"outputs[{i}]: {o['name']!r} is None for the example inputs; {none_hint}")
        if got != want:
            raise ValueError(f"outputs: declared {sorted(want)}, the model returned keys {sorted(got)}")
        by_name = {k: (d, s) for k, d, s in found}
        pairs = [(i, o, by_name[o["name"]]) for i, o in enumerate(outputs)]
        if nones:
            _warn_none_outputs(sorted(nones), sorted(want))
    else:
        if len(found) == len(outputs):
            positions = list(range(len(outputs)))
        else:
            positions = [output_index(o["name"]) for o in outputs]
            if any(p is None or p >= len(found) for p in positions):
                nones = [i for i, (_, d, _) in enumerate(found) if d is None]
                hint = (f"; elements {nones} are None: name the others NAME__<index> (their "
                        f"position in the result), e.g. OUTPUT__0") if nones else ""
                raise ValueError(f"outputs: {len(outputs)} declared, the model returned "
                                 f"{len(found)}{hint}")
            left_out = [i for i in range(len(found)) if i not in positions]
            if left_out:
                _warn_none_outputs([f"element {i}" for i in left_out], [o["name"] for o in outputs])
        pairs = []
        for i, (o, p) in enumerate(zip(outputs, positions)):
            _, d, s = found[p]
            if d is None:
                raise ValueError(f"outputs[{i}]: {o['name']!r} (element {p} of the result) is None "
                                 f"for the example inputs; {none_hint}")
            pairs.append((i, o, (d, s)))
    for i, spec, (datatype, shape) in pairs:
        check_declared(f"outputs[{i}]", spec, datatype, shape,
                       "the model returned", "the model returned")

