"""The deep seeds of fuzz/make_seeds.py: inputs nested far past the limits (10,000 levels)
and at the limit and one past it, for the JSON targets (arrays, objects, never closed, inside
the fields a decoder reads) and for the gRPC target (nested protobuf groups); and `write`,
which every seed writer uses. Imported by make_seeds.py, not run on its own.
"""


def write(folder, name, data):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)


DEEP = 10000  # levels in the deep seeds: far past the limits of 100, files under 100 KiB
LIMIT = 100  # common/json_limits.h kMaxJsonDepth; protobuf's recursion limit


def arrays(n, inner="1"):
    return "[" * n + inner + "]" * n


def objects(n, inner="0"):
    return '{"a":' * n + inner + "}" * n


def deep_json_seeds(out, wrap, fields, suffix=".bin", whole=True):
    """The deep bodies of one JSON target. `wrap(body)` makes the fuzz input of a body (the
    target's selector byte or header line); `fields(value)` yields (name, body) pairs that
    put a JSON value where the target reads one, with the nesting the body adds around it.
    `whole`: also bodies that are nothing but nesting."""
    text = lambda s: s.encode()
    for name, (around, body) in fields.items():
        write(out, "deep_%s%s" % (name, suffix), wrap(text(body(arrays(DEEP)))))
        # `around` levels enclose the value: the value's own arrays make up the rest.
        write(out, "depth_%d_%s%s" % (LIMIT, name, suffix),
              wrap(text(body(arrays(LIMIT - around)))))
        write(out, "depth_%d_%s%s" % (LIMIT + 1, name, suffix),
              wrap(text(body(arrays(LIMIT + 1 - around)))))
    if not whole:
        return
    write(out, "deep_arrays" + suffix, wrap(text(arrays(DEEP, ""))))
    write(out, "deep_objects" + suffix, wrap(text(objects(DEEP))))
    write(out, "deep_unclosed" + suffix, wrap(text("[" * DEEP)))
    write(out, "deep_mixed" + suffix, wrap(text('[{"a":' * (DEEP // 2) + "1" + "}]" * (DEEP // 2))))


def http_deep_seeds(out):
    def tensor(value):
        return ('{"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1],"data":%s}]}' % value)
    deep_json_seeds(out, lambda b: b"\n" + b, {
        "data": (3, tensor),
        "parameters": (2, lambda v: '{"inputs":[],"parameters":{"p":%s}}' % v),
    })
    # The JSON part nested deep, binary data behind it.
    header = arrays(DEEP).encode()
    write(out, "deep_binary_header.bin", str(len(header)).encode() + b"\n" + header + b"\0" * 8)


def openai_deep_seeds(out):
    deep_json_seeds(out, lambda b: b"\x00" + b, {
        "prompt": (1, lambda v: '{"model":"generator","prompt":%s}' % v),
        "messages": (3, lambda v: '{"model":"generator","messages":[{"role":"user","content":%s}]}' % v),
        "input": (1, lambda v: '{"model":"generator","input":%s}' % v),
    })


def groups(levels, field=15):
    """`levels` groups of `field` nested in one another (start tags, then end tags)."""
    return bytes([(field << 3) | 3]) * levels + bytes([(field << 3) | 4]) * levels


def delimited(field, payload):
    """A length-delimited field: tag, varint length, payload."""
    n, length = len(payload), b""
    while True:
        length += bytes([(n & 0x7F) | (0x80 if n >= 0x80 else 0)])
        n >>= 7
        if not n:
            break
    return bytes([(field << 3) | 2]) + length + payload


def infer_request_deep_seeds(pb, out):
    r = pb.ModelInferRequest(model_name="fuzz", model_version="1", id="deep")
    t = r.inputs.add(name="INPUT0", datatype="INT32", shape=[2])
    t.contents.int_contents.extend([1, 2])
    base = r.SerializeToString()
    write(out, "deep_groups.pb", base + groups(DEEP))
    write(out, "deep_groups_known_field.pb", base + groups(DEEP, field=1))
    write(out, "deep_groups_unclosed.pb", base + bytes([(15 << 3) | 3]) * DEEP)
    write(out, "depth_%d_groups.pb" % LIMIT, base + groups(LIMIT))
    write(out, "depth_%d_groups.pb" % (LIMIT + 1), base + groups(LIMIT + 1))
    # Inside a submessage: an input tensor (field 5), its contents (field 5 of that), and a
    # parameter's value (field 4: a map entry whose value, field 2, is an InferParameter).
    tensor = t.SerializeToString()
    write(out, "deep_groups_in_input.pb", base + delimited(5, tensor + groups(DEEP)))
    contents = t.contents.SerializeToString()
    write(out, "deep_groups_in_contents.pb",
          base + delimited(5, b"\x0a\x01x\x12\x05INT32\x1a\x01\x02" +
                           delimited(5, contents + groups(DEEP))))
    entry = delimited(1, b"p") + delimited(2, b"\x08\x01" + groups(DEEP))
    write(out, "deep_groups_in_parameter.pb", base + delimited(4, entry))
    # Just inside and just past the limit counted from inside an input.
    write(out, "depth_%d_groups_in_input.pb" % (LIMIT - 1),
          base + delimited(5, tensor + groups(LIMIT - 1)))
    write(out, "depth_%d_groups_in_input.pb" % LIMIT, base + delimited(5, tensor + groups(LIMIT)))
