"""Build and validate manypy manifests (package_format/SCHEMA.md, schema versions 1 and 2).

Everything here is plain Python (no torch import), so the CLI's `inspect` and
the tests can use it cheaply. Every error is a ValueError whose message starts
with the manifest field at fault, e.g. ``inputs[1].datatype: ...``.
"""

import json
import platform as _platform
import re

from . import openai_spec as _openai
from .manifest_checks import (check_int as _check_int, check_keys as _check_keys,
                              check_string as _check_string, fail as _fail, is_int as _is_int)
from .manifest_tensors import tensor_specs
from .manifest_tensors import validate_tensor_list as _validate_tensor_list

SCHEMA_VERSION = 2  # written; every version from 1 up is read
SCHEMA_VERSIONS = (1, 2)
PLATFORM = "manypy_python"  # Python run by the server's interpreters (the default)
TORCHSCRIPT_PLATFORM = "torchscript"  # a TorchScript module run by libtorch from C++
# Where a TorchScript archive keeps its module (torch.jit.save's bytes).
TORCHSCRIPT_PACKAGE, TORCHSCRIPT_RESOURCE = "model", "model.pt"
# An AOTInductor package (torch._inductor.aoti_compile_and_package's .pt2, a
# compiled shared object) run by libtorch's AOTInductor runtime from C++.
AOTI_PLATFORM = "torch_aoti"
AOTI_PACKAGE, AOTI_RESOURCE = "model", "model.pt2"
PLATFORMS = (PLATFORM, TORCHSCRIPT_PLATFORM, AOTI_PLATFORM)
# The entry point kind each non-Python platform needs, and only it.
_PLATFORM_KINDS = {TORCHSCRIPT_PLATFORM: "torchscript", AOTI_PLATFORM: "aoti"}
MANIFEST_PACKAGE = "manypy"
MANIFEST_RESOURCE = "manifest.json"

MAX_BATCH_SIZE_LIMIT = 65536

_MODEL_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_DEVICE_RE = re.compile(r"^(cpu|cuda|cuda:[0-9]+)$")
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

_TOP_LEVEL_FIELDS = {
    "schema_version": True, "name": True, "version": True, "platform": True,
    "entry_point": True, "method": False, "inputs": True, "outputs": True,
    "max_batch_size": False, "batching": False, "instance_count": False,
    "max_queue_size": False, "max_execution_seconds": False,
    "default_timeout_microseconds": False,
    "device": False, "description": False, "packaged_with": False, "streaming": False,
    "response_cache": False, "sequence_batching": False, "openai": False,
}  # field -> required (packaged_with: required from schema version 2)
_PACKAGED_WITH_FIELDS = ("torch", "python", "manypy")
_VERSION_RE = re.compile(r"^[0-9][A-Za-z0-9.+_-]{0,63}$")
_BATCHING_FIELDS = ("dynamic", "preferred_batch_sizes", "max_queue_delay_microseconds")
_ENTRY_FIELDS = {
    "pickle": ("kind", "package", "resource"),
    "factory": ("kind", "module", "function", "weights"),
    "torchscript": ("kind", "package", "resource"),
    "aoti": ("kind", "package", "resource"),
}
_RESOURCE_FIELDS = ("package", "resource")


def _validate_resource(obj, field):
    if not isinstance(obj, dict):
        _fail(field, "must be an object {package, resource}")
    _check_keys(obj, _RESOURCE_FIELDS, field)
    for key in _RESOURCE_FIELDS:
        if key not in obj:
            _fail(f"{field}.{key}", "required field is missing")
    _check_string(obj["package"], f"{field}.package", _MODULE_RE)
    _check_resource_name(obj["resource"], f"{field}.resource")


def _check_resource_name(value, field):
    _check_string(value, field)
    if not value or value.startswith("/") or "\\" in value or "\0" in value or ".." in value.split("/"):
        _fail(field, f"invalid resource name {value!r}")


def _validate_entry_point(ep, field="entry_point"):
    if not isinstance(ep, dict):
        _fail(field, "must be an object with a 'kind'")
    if "kind" not in ep:
        _fail(f"{field}.kind", "required field is missing")
    kind = ep["kind"]
    if kind not in _ENTRY_FIELDS:
        _fail(f"{field}.kind", f"must be 'pickle', 'factory', 'torchscript' or 'aoti', got {kind!r}")
    _check_keys(ep, _ENTRY_FIELDS[kind], field)
    if kind in ("pickle", "torchscript", "aoti"):
        if "package" in ep:
            _check_string(ep["package"], f"{field}.package", _MODULE_RE)
        if "resource" in ep:
            _check_resource_name(ep["resource"], f"{field}.resource")
    else:
        for key in ("module", "function"):
            if key not in ep:
                _fail(f"{field}.{key}", "required field is missing for kind 'factory'")
        _check_string(ep["module"], f"{field}.module", _MODULE_RE)
        _check_string(ep["function"], f"{field}.function", _IDENT_RE)
        if "weights" in ep:
            _validate_resource(ep["weights"], f"{field}.weights")


def _validate_batching(batching, max_batch_size, field="batching"):
    if not isinstance(batching, dict):
        _fail(field, "must be an object")
    _check_keys(batching, _BATCHING_FIELDS, field)
    dynamic = batching.get("dynamic", False)
    if not isinstance(dynamic, bool):
        _fail(f"{field}.dynamic", f"must be true or false, got {dynamic!r}")
    if dynamic and max_batch_size <= 0:
        _fail(f"{field}.dynamic", "dynamic batching needs max_batch_size > 0")
    if "preferred_batch_sizes" in batching:
        sizes = batching["preferred_batch_sizes"]
        if not isinstance(sizes, list):
            _fail(f"{field}.preferred_batch_sizes", f"must be a list of integers, got {sizes!r}")
        for size in sizes:
            if not _is_int(size) or not 1 <= size <= max_batch_size:
                _fail(f"{field}.preferred_batch_sizes",
                      f"{size!r} is not in 1..max_batch_size ({max_batch_size})")
    if "max_queue_delay_microseconds" in batching:
        _check_int(batching["max_queue_delay_microseconds"],
                   f"{field}.max_queue_delay_microseconds", lo=0)


def validate_manifest(manifest):
    """Checks a manifest dict against SCHEMA.md; raises ValueError naming the
    first field at fault. Returns the manifest unchanged."""
    if not isinstance(manifest, dict):
        _fail("manifest", f"must be a JSON object, got {type(manifest).__name__}")
    _check_keys(manifest, list(_TOP_LEVEL_FIELDS), "")
    for key, required in _TOP_LEVEL_FIELDS.items():
        if required and key not in manifest:
            _fail(key, "required field is missing")
    _check_int(manifest["schema_version"], "schema_version")
    if manifest["schema_version"] not in SCHEMA_VERSIONS:
        _fail("schema_version", f"unsupported schema version {manifest['schema_version']} "
              f"(this tool knows 1 to {SCHEMA_VERSION})")
    if manifest["schema_version"] >= 2:
        if "packaged_with" not in manifest:
            _fail("packaged_with", "required field is missing (schema version 2)")
        packaged = manifest["packaged_with"]
        if not isinstance(packaged, dict):
            _fail("packaged_with", f"must be an object, got {packaged!r}")
        _check_keys(packaged, _PACKAGED_WITH_FIELDS, "packaged_with")
        for key in _PACKAGED_WITH_FIELDS:
            if key not in packaged:
                _fail(f"packaged_with.{key}", "required field is missing")
            _check_string(packaged[key], f"packaged_with.{key}", _VERSION_RE)
    elif "packaged_with" in manifest:
        _fail("packaged_with", "not a schema version 1 field (use schema_version 2)")
    _check_string(manifest["name"], "name", _MODEL_NAME_RE)
    if manifest["name"].startswith("."):
        _fail("name", f"must not start with '.', got {manifest['name']!r}")
    _check_int(manifest["version"], "version", lo=1)
    if manifest["platform"] not in PLATFORMS:
        _fail("platform", f"must be one of {PLATFORMS}, got {manifest['platform']!r}")
    _validate_entry_point(manifest["entry_point"])
    kind = manifest["entry_point"]["kind"]
    needed = _PLATFORM_KINDS.get(manifest["platform"])
    if needed != (kind if kind in _PLATFORM_KINDS.values() else None):
        _fail("entry_point.kind", f"kind {kind!r} does not go with platform "
              f"{manifest['platform']!r} (torchscript needs kind torchscript, torch_aoti "
              f"kind aoti, and only they)")
    if "method" in manifest:
        _check_string(manifest["method"], "method", _IDENT_RE)
    _validate_tensor_list(manifest["inputs"], "inputs")
    _validate_tensor_list(manifest["outputs"], "outputs")
    max_batch_size = manifest.get("max_batch_size", 0)
    _check_int(max_batch_size, "max_batch_size", lo=0, hi=MAX_BATCH_SIZE_LIMIT)
    if "batching" in manifest:
        _validate_batching(manifest["batching"], max_batch_size)
    for field in ("instance_count", "max_queue_size", "max_execution_seconds",
                  "default_timeout_microseconds"):
        if field in manifest:
            _check_int(manifest[field], field, lo=0)
    if "device" in manifest:
        _check_string(manifest["device"], "device", _DEVICE_RE)
    if "description" in manifest:
        _check_string(manifest["description"], "description")
    if "streaming" in manifest:
        _validate_streaming(manifest)
    if "response_cache" in manifest:
        _validate_response_cache(manifest)
    if "sequence_batching" in manifest:
        _validate_sequence_batching(manifest)
    if "openai" in manifest:
        _openai.validate(manifest["openai"], manifest["inputs"], manifest["outputs"])
    return manifest


_SEQUENCE_FIELDS = ("max_sequence_idle_microseconds", "max_concurrent_sequences")


def _validate_sequence_batching(manifest):
    """SCHEMA.md's `sequence_batching` (manifest.cc's SequenceBatchingProblem)."""
    seq = manifest["sequence_batching"]
    if not isinstance(seq, dict):
        _fail("sequence_batching", f"must be an object, got {seq!r}")
    for key in seq:
        if key not in _SEQUENCE_FIELDS:
            _fail(f"sequence_batching.{key}", f"unknown field (expected one of {', '.join(_SEQUENCE_FIELDS)})")
    for key in _SEQUENCE_FIELDS:
        if key in seq:
            _check_int(seq[key], f"sequence_batching.{key}", lo=1)
    if manifest.get("platform", PLATFORM) != PLATFORM:
        _fail("sequence_batching", f"only a Python model (platform {PLATFORM}) keeps per-sequence state")
    if manifest.get("batching", {}).get("dynamic", False):
        _fail("sequence_batching", "a sequence model runs one request of a sequence at a time: "
              "it cannot also batch dynamically (batching.dynamic)")
    if manifest.get("streaming", False):
        _fail("sequence_batching", "a streaming model cannot keep sequences")
    if manifest.get("response_cache", False):
        _fail("sequence_batching", "a sequence model's answers depend on its sequence's state: "
              "they cannot be cached (response_cache)")


def normalize_sequence_batching(sequence_batching):
    """None/False: none; True: the defaults; a dict: those fields."""
    if sequence_batching is None or sequence_batching is False:
        return None
    if sequence_batching is True:
        return {}
    return dict(sequence_batching)


def _validate_response_cache(manifest):
    """SCHEMA.md's `response_cache`: a bool, never with `streaming`."""
    cache = manifest["response_cache"]
    if not isinstance(cache, bool):
        _fail("response_cache", f"must be true or false, got {cache!r}")
    if cache and manifest.get("streaming", False):
        _fail("streaming", "a streaming model's responses cannot be cached (response_cache)")


def _validate_streaming(manifest):
    """The rules of SCHEMA.md's `streaming` (those of manifest.cc's StreamingProblem)."""
    streaming = manifest["streaming"]
    if not isinstance(streaming, bool):
        _fail("streaming", f"must be true or false, got {streaming!r}")
    if not streaming:
        return
    if manifest.get("platform", PLATFORM) != PLATFORM:
        _fail("streaming", f"only a Python model (platform {PLATFORM}) can stream")
    if manifest.get("batching", {}).get("dynamic", False):
        _fail("streaming", "a streaming model answers each request on its own: it cannot "
              "batch dynamically")


def normalize_batching(batching):
    """Accepts None, True/False (dynamic on/off) or a dict; returns a dict or
    None."""
    if batching is None:
        return None
    if isinstance(batching, bool):
        return {"dynamic": batching}
    if not isinstance(batching, dict):
        _fail("batching", f"must be a dict, a bool or None, got {batching!r}")
    out = dict(batching)
    if "preferred_batch_sizes" in out and isinstance(out["preferred_batch_sizes"], tuple):
        out["preferred_batch_sizes"] = list(out["preferred_batch_sizes"])
    return out


def packaging_versions():
    """{"torch", "python", "manypy"}: the versions an archive made now is packaged
    with (imports torch, which packaging has done anyway)."""
    import torch
    from . import __version__
    return {"torch": torch.__version__, "python": _platform.python_version(),
            "manypy": __version__}


def build_manifest(name, version, entry_point, inputs, outputs, max_batch_size=0,
                   batching=None, instance_count=0, device="cpu", description="",
                   method=None, max_queue_size=0, max_execution_seconds=0,
                   default_timeout_microseconds=0, platform=PLATFORM, packaged_with=None,
                   streaming=False, response_cache=False, sequence_batching=None, openai=None):
    """Returns a validated manifest dict. inputs/outputs take dicts or
    (name, datatype, shape) tuples. packaged_with defaults to this Python's
    packaging_versions()."""
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "version": version,
        "platform": platform,
        "entry_point": dict(entry_point),
    }
    if method is not None:
        manifest["method"] = method
    manifest["inputs"] = tensor_specs(inputs, "inputs")
    manifest["outputs"] = tensor_specs(outputs, "outputs")
    manifest["max_batch_size"] = max_batch_size
    batching = normalize_batching(batching)
    if batching is not None:
        manifest["batching"] = batching
    manifest["instance_count"] = instance_count
    # Written only when set, so archives that do not use them stay as before.
    for field, value in (("max_queue_size", max_queue_size),
                         ("max_execution_seconds", max_execution_seconds),
                         ("default_timeout_microseconds", default_timeout_microseconds)):
        if value:
            manifest[field] = value
    manifest["device"] = device
    manifest["description"] = description
    if streaming:  # written only when set, as above
        manifest["streaming"] = True
    if response_cache:
        manifest["response_cache"] = True
    sequence_batching = normalize_sequence_batching(sequence_batching)
    if sequence_batching is not None:
        manifest["sequence_batching"] = sequence_batching
    openai = _openai.normalize(openai)
    if openai is not None:
        manifest["openai"] = openai
    manifest["packaged_with"] = dict(packaged_with or packaging_versions())
    return validate_manifest(manifest)


def pretty(obj, indent=0, width=88):
    """JSON text with objects and lists expanded only where the compact form
    does not fit in width columns (so tensor specs stay one line each)."""
    compact = json.dumps(obj, ensure_ascii=False, separators=(", ", ": "))
    if not isinstance(obj, (dict, list)) or not obj or (indent and len(compact) + indent <= width):
        return compact
    pad = " " * (indent + 2)
    if isinstance(obj, dict):
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {pretty(v, indent + 2, width)}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + pretty(v, indent + 2, width) for v in obj]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def dumps(manifest):
    """The manifest as stored in the archive: UTF-8 JSON, pretty, stable."""
    return pretty(manifest) + "\n"


def loads(text):
    """Parses and validates manifest text (str or bytes)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            _fail("manifest", f"not UTF-8: {e}")
    try:
        manifest = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: nested too deeply
        _fail("manifest", f"not valid JSON: {e}")
    return validate_manifest(manifest)
