"""manypy-package: create, inspect and validate manypy model archives.

    manypy-package create --model-file net.py --factory net:build [--weights w.pt] \\
        --name net --version 1 --input INPUT__0:FP32:16 --output OUTPUT__0:FP32:4 \\
        --max-batch-size 8 --dynamic-batching -o net.mpk
    manypy-package inspect net.mpk
    manypy-package validate [--load] net.mpk

`create` ends with the load check (load_check.py): the archive is loaded in a
fresh server Python as the server loads it, warmed up, and its example run
compared with the eager model's; an archive that fails is not written.
`--no-load-check` skips it; `validate --load` runs it on an existing archive.

Also runnable as `python3 -m manypy.cli` (with package_format/python on
PYTHONPATH). Exit status: 0 success, 1 error (bad arguments, model or
archive), 2 the C++ checker `manypy-archive-check` is missing; `validate`
otherwise exits with the checker's status.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import zipfile

from . import manifest as _manifest
from .cli_inspect import cmd_inspect
from .manifest_tensors import parse_tensor_arg

CHECKER = "manypy-archive-check"


def _parse_factory(text, model_file):
    """'module:function' or 'function' -> (module or None, function)."""
    module, sep, function = text.rpartition(":")
    if not sep:
        module, function = "", text
    if not function.isidentifier():
        raise ValueError(f"--factory: {function!r} is not a function name (use MODULE:FUNCTION)")
    if model_file and module:
        stem = os.path.splitext(os.path.basename(model_file))[0]
        if module.rpartition(".")[2] != stem:  # "net" or, in a package, "models.net"
            raise ValueError(f"--factory: module {module!r} does not match --model-file "
                             f"{model_file!r} (module {stem!r})")
    if not model_file and not module:
        raise ValueError("--factory: give MODULE:FUNCTION, or --model-file with FUNCTION")
    return module or None, function


def _openai_declaration(path):
    """--openai FILE.json: the manifest's `openai` object, or None."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f"--openai: cannot read {path}: {e}") from e


def _refuse_openai(common, archive):
    if common.pop("openai"):
        raise ValueError(f"--openai: only a Python model serves the OpenAI routes ({archive} "
                         "cannot be declared for them yet)")


def _batching(args):
    if not (args.dynamic_batching or args.preferred_batch_size or args.max_queue_delay_us is not None):
        return None
    batching = {"dynamic": bool(args.dynamic_batching)}
    if args.preferred_batch_size:
        batching["preferred_batch_sizes"] = list(args.preferred_batch_size)
    if args.max_queue_delay_us is not None:
        batching["max_queue_delay_microseconds"] = args.max_queue_delay_us
    return batching


def _build_model(module, function, weights):
    from .weights import load_state_dict, load_weights  # imports torch: only for create

    build = getattr(module, function, None)
    if not callable(build):
        raise ValueError(f"--factory: module {module.__name__!r} has no callable {function!r}")
    model = build()
    if weights:
        load_state_dict(model, load_weights(weights))
    return model


def _dynamic_dims(values):
    """--dynamic-dim NAME:D1,D2 (repeatable) -> {NAME: [D1, D2]}; dimensions
    count from 0 and leave out the batch dimension, as in the manifest."""
    dims = {}
    for value in values:
        name, sep, text = value.rpartition(":")
        try:
            indices = [int(d) for d in text.split(",")] if sep and name else None
        except ValueError:
            indices = None
        if not indices:
            raise ValueError(f"--dynamic-dim: expected NAME:D1,D2,... (e.g. boxes:0), got {value!r}")
        dims.setdefault(name, []).extend(indices)
    return dims


def cmd_create(args):
    from . import package  # imports torch: only for create

    inputs = [parse_tensor_arg(t, f"--input[{i}]") for i, t in enumerate(args.input)]
    outputs = [parse_tensor_arg(t, f"--output[{i}]") for i, t in enumerate(args.output)] or None
    if not inputs:
        raise ValueError("--input: at least one input is required (NAME:DTYPE:D1,D2,...)")
    module_name, function = _parse_factory(args.factory, args.model_file)
    if os.getcwd() not in sys.path:  # MODULE:FUNCTION resolves like `python3 -m` would
        sys.path.insert(0, os.getcwd())
    module = package.import_model_module(args.model_file or module_name)
    common = dict(
        name=args.name, version=args.version, inputs=inputs, outputs=outputs,
        max_batch_size=args.max_batch_size, batching=_batching(args),
        instance_count=args.instance_count, device=args.device,
        description=args.description, intern=args.intern or None,
        extern=args.extern or None, method=args.method,
        dynamic_dims=_dynamic_dims(args.dynamic_dim) or None,
        response_cache=args.response_cache,
        sequence_batching={"max_sequence_idle_microseconds": args.sequence_idle_us}
        if args.sequence_idle_us else (True if args.sequence_batching else None),
        openai=_openai_declaration(args.openai))
    example = None
    if outputs is None or args.check:
        example = package.example_inputs_for(inputs, args.max_batch_size, batch_size=1)

    if args.format == "torchscript" and not args.torchscript:
        args.torchscript = "script"
    if args.format == "aoti":
        if args.torchscript:
            raise ValueError("--format aoti: leave out --torchscript (one format per archive)")
        if args.as_factory:
            raise ValueError("--format aoti: the factory is called now and the model compiled; "
                             "an AOTInductor archive holds no Python to call it (leave out "
                             "--as-factory)")
        for unused in ("intern", "extern"):
            if common.pop(unused):
                raise ValueError(f"--{unused}: an AOTInductor archive has no Python modules")
        if common.pop("sequence_batching"):
            raise ValueError("--sequence-batching: only a Python model keeps per-sequence state "
                             "(an AOTInductor archive has no Python to keep it in)")
        _refuse_openai(common, "an AOTInductor archive")
        model = _build_model(module, function, args.weights)
        if example is None:  # torch.export traces the model on an example
            example = package.example_inputs_for(inputs, args.max_batch_size, batch_size=1)
        manifest = package.export(model, args.output_path, example_inputs=example,
                                  load_check=args.load_check, format="aoti", **common)
    elif args.torchscript:
        from . import torchscript
        model = _build_model(module, function, args.weights)
        if example is None and args.torchscript == "trace":
            example = package.example_inputs_for(inputs, args.max_batch_size, batch_size=1)
        for unused in ("intern", "extern"):
            if common.pop(unused):
                raise ValueError(f"--{unused}: a TorchScript archive has no Python modules")
        if common.pop("sequence_batching"):
            raise ValueError("--sequence-batching: only a Python model keeps per-sequence state "
                             "(a TorchScript archive has no Python to keep it in)")
        _refuse_openai(common, "a TorchScript archive")
        manifest = torchscript.export(model, args.output_path, example_inputs=example,
                                      mode=args.torchscript, **common)
    elif args.as_factory:
        manifest = package.export_factory(module, function, args.weights, args.output_path,
                                          example_inputs=example, load_check=args.load_check,
                                          **common)
    else:
        model = _build_model(module, function, args.weights)
        manifest = package.export(model, args.output_path, example_inputs=example,
                                  modules=[module], load_check=args.load_check, **common)
    size = os.path.getsize(args.output_path)
    print(f"wrote {args.output_path} ({manifest['name']} v{manifest['version']}, "
          f"{manifest['entry_point']['kind']}, {size:,} bytes)")
    if args.torchscript:
        pass  # compiled and run here; the server runs it with libtorch, no Python loader
    elif args.format == "aoti" and args.load_check:
        from . import aoti
        print(f"load check: the .pt2 loads with AOTIModelPackageLoader (the AOTInductor runtime "
              f"the server's libtorch runs it in); the example (and a batch of --max-batch-size) "
              f"match the eager "
              f"model's outputs (floating point within rtol {aoti.RTOL:g}, atol {aoti.ATOL:g})")
    elif args.load_check:
        from . import load_check
        ran = (f"the example's outputs match the eager model's (equal; floating point within "
               f"{load_check.ATOL:g})") if example is not None else \
            "no example (leave out --output, or give --check, to run one)"
        print(f"load check: loads in a fresh {load_check.server_python()} as the server loads "
              f"it, warm-up ran, {ran}")
    else:
        print("load check: skipped (--no-load-check); `manypy-package validate --load` runs it "
              "where the model's runtime is installed")
    return 0


def find_checker():
    """The C++ checker: next to this launcher, then $MANYPY_ARCHIVE_CHECK,
    then PATH, then <repo>/build/bin (running from a source tree). None if
    none is found."""
    launcher_dir = os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else None
    candidates = []
    if launcher_dir:
        candidates.append(os.path.join(launcher_dir, CHECKER))
    if os.environ.get("MANYPY_ARCHIVE_CHECK"):
        candidates.append(os.environ["MANYPY_ARCHIVE_CHECK"])
    on_path = shutil.which(CHECKER)
    if on_path:
        candidates.append(on_path)
    repo = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
    candidates.append(os.path.join(repo, "build", "bin", CHECKER))
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def cmd_validate(args):
    if args.python_only:
        from . import package
        try:
            manifest = package.check_archive(args.archive)
        except (ValueError, zipfile.BadZipFile, OSError) as e:
            print(f"invalid: {e}")
            return 1
        print(f"valid (Python checks): {args.archive}: {manifest['name']} v{manifest['version']}")
        return _validate_load(args.archive) if args.load else 0
    checker = find_checker()
    if checker is None:
        print(f"manypy-package: {CHECKER} not found (looked next to {sys.argv[0]}, in "
              f"$MANYPY_ARCHIVE_CHECK and on PATH); build it with `make build` "
              f"(it lands in build/bin/) or set MANYPY_ARCHIVE_CHECK. "
              f"`validate --python-only` runs the Python subset of the checks.", file=sys.stderr)
        return 2
    sys.stdout.flush()
    proc = subprocess.run([checker, args.archive])  # its reason goes to our stdout/stderr
    if proc.returncode != 0 or not args.load:
        return proc.returncode
    return _validate_load(args.archive)


def _validate_load(path):
    """validate --load: the archive loaded as the server loads it (a Python
    archive in a fresh server Python, load_check.py; a TorchScript one with
    torch.jit.load, as the server's libtorch does), then run on a synthetic
    example whose outputs must match the signature. Exit status 0 or 1."""
    from . import load_check, package

    manifest = package.read_manifest(path)
    example = package.example_inputs_for(manifest["inputs"], manifest.get("max_batch_size", 0))
    try:
        if manifest["platform"] == _manifest.AOTI_PLATFORM:
            from . import aoti
            loaded = [aoti.Loaded(path, manifest).run(example)]
            how = "AOTIModelPackageLoader, in the server's AOTInductor runtime"
        elif manifest["platform"] == _manifest.TORCHSCRIPT_PLATFORM:
            module = package.load_torchscript(path, manifest)
            import torch
            with torch.inference_mode():
                result = module(*example)
            loaded = load_check.eager_outputs(manifest, [result])
            how = "torch.jit.load, as the server's libtorch"
        else:
            loaded = load_check.check_loads(path, [example], manifest=manifest)
            how = f"the server's loader in a fresh {load_check.server_python()}, warm-up included"
    except Exception as e:  # the model's own failure, whatever its type
        print(f"does not load: {e}")
        return 1
    problems = load_check.signature_problems(manifest, loaded)
    if problems:
        print(f"loads, but its outputs break the manifest: {'; '.join(problems)}")
        return 1
    print(f"loads ({how}): {manifest['name']} v{manifest['version']}; a synthetic example "
          f"ran and its outputs match the signature")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="manypy-package",
        description="Create, inspect and validate manypy model archives (package_format/SCHEMA.md).")
    sub = parser.add_subparsers(dest="command", required=True)

    c = sub.add_parser("create", help="package a model built by a factory function",
                       description="Package a model. By default the factory is called now, the "
                       "weights are loaded into it and the model is pickled (entry point kind "
                       "'pickle', weights shared at load); --as-factory stores kind 'factory'.")
    c.add_argument("--model-file", help="the model's Python file (interned into the archive)")
    c.add_argument("--factory", required=True,
                   help="MODULE:FUNCTION (or FUNCTION with --model-file): zero-argument builder")
    c.add_argument("--weights", help="a torch.save'd state dict loaded into the model")
    c.add_argument("--name", help="model name (default: the output file name)")
    c.add_argument("--version", type=int, default=1, help="model version >= 1 (default 1)")
    c.add_argument("--input", action="append", default=[], metavar="NAME:DTYPE:D1,D2,...",
                   help="an input, in call order (repeatable; -1 = variable dimension; "
                   "batch dimension left out when --max-batch-size > 0)")
    c.add_argument("--output", action="append", default=[], metavar="NAME:DTYPE:D1,D2,...",
                   help="an output (repeatable); if none, outputs are inferred from one run "
                   "on synthetic inputs")
    c.add_argument("--dynamic-dim", action="append", default=[], metavar="NAME:D1,D2,...",
                   help="mark dimensions of input or output NAME variable (-1), counted "
                        "from 0 without the batch dimension, e.g. boxes:0 (repeatable)")
    c.add_argument("--max-batch-size", type=int, default=0, metavar="B",
                   help="largest batch per call; 0 (default) = the model takes no batch dimension")
    c.add_argument("--dynamic-batching", action="store_true",
                   help="let the server batch requests together (needs --max-batch-size > 0)")
    c.add_argument("--preferred-batch-size", type=int, nargs="+", action="extend", default=[],
                   metavar="N", help="batch sizes the batcher aims for")
    c.add_argument("--max-queue-delay-us", type=int, metavar="US",
                   help="longest a request waits for a batch to fill")
    c.add_argument("--response-cache", action="store_true",
                   help="let a server with a response cache (--response-cache-bytes) answer "
                        "repeated requests from it: only for a model whose outputs depend on "
                        "its inputs alone")
    c.add_argument("--sequence-batching", action="store_true",
                   help="a stateful sequence model: requests carry sequence_id, "
                        "sequence_start and sequence_end; the model keeps state in "
                        "manypy.request.state")
    c.add_argument("--sequence-idle-us", type=int, metavar="US",
                   help="with --sequence-batching: a sequence idle this long is ended "
                        "(default 1000000)")
    c.add_argument("--openai", metavar="FILE.json",
                   help="the OpenAI routes the model serves and how (a JSON object with routes, "
                        "inputs and outputs; docs/text-generation.md)")
    c.add_argument("--instance-count", type=int, default=0, metavar="K",
                   help="model instances; 0 (default) = one per interpreter")
    c.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    c.add_argument("--description", default="")
    c.add_argument("--method", help="the model attribute the server calls (default: model(...))")
    c.add_argument("--intern", action="append", default=[], metavar="PATTERN",
                   help="torch.package intern pattern (default **)")
    c.add_argument("--extern", action="append", default=[], metavar="PATTERN",
                   help="extra torch.package extern pattern (every module installed in this "
                   "Python's site-/dist-packages, and the standard library, already is)")
    kind = c.add_mutually_exclusive_group()
    kind.add_argument("--pickle", dest="as_factory", action="store_false",
                      help="entry point kind 'pickle' (the default)")
    kind.add_argument("--as-factory", dest="as_factory", action="store_true",
                      help="entry point kind 'factory': the server calls the factory")
    kind.add_argument("--torchscript", nargs="?", const="script", choices=["script", "trace"],
                      help="platform 'torchscript': compile the model with torch.jit.script "
                      "(default) or trace it on synthetic inputs; the server runs it from C++ "
                      "with no interpreter")
    c.add_argument("--format", choices=["python", "torchscript", "aoti"], default="python",
                   help="python (default): the model pickled, run by the server's interpreters; "
                   "torchscript: as --torchscript; aoti: captured with torch.export (batch "
                   "dimension dynamic up to --max-batch-size), compiled ahead of time by "
                   "AOTInductor (PyTorch >= 2.6, a C++ compiler) into platform torch_aoti, run "
                   "by the server's libtorch without Python")
    c.add_argument("--check", action="store_true",
                   help="run the model once on synthetic inputs even when outputs are given")
    c.add_argument("--no-load-check", dest="load_check", action="store_false",
                   help="do not load the finished archive in a fresh server Python as the "
                   "server does (for archives built on a machine without the model's runtime; "
                   "`validate --load` runs the check later)")
    c.add_argument("-o", "--output-path", required=True, metavar="OUT.mpk")
    c.set_defaults(func=cmd_create, as_factory=False, torchscript=None, load_check=True)

    i = sub.add_parser("inspect", help="print an archive's manifest, entries and the modules "
                       "it expects the server's Python to provide")
    i.add_argument("archive")
    i.set_defaults(func=cmd_inspect)

    v = sub.add_parser("validate", help="check an archive with the server's C++ checker")
    v.add_argument("archive")
    v.add_argument("--python-only", action="store_true",
                   help="run the Python subset of the checks instead of manypy-archive-check")
    v.add_argument("--load", action="store_true",
                   help="then load the archive as the server does (in a fresh server Python), "
                   "warm it up and run a synthetic example; its outputs must match the signature")
    v.set_defaults(func=cmd_validate)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, ImportError) as e:
        print(f"manypy-package {args.command}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # e.g. `manypy-package inspect x.mpk | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
