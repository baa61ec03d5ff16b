#!/usr/bin/python3
"""Packages every example model into a model repository: DIR/<name>.mpk.

    /usr/bin/python3 models/make_repository.py --out build/model-repository

(`make models` runs exactly that.) Each model module in this folder has a
build() factory, a SIGNATURE dict (keyword arguments for
manypy.package.export) and example_inputs(); the example is run once to
check the declared signature (and more_example_inputs(), where a model has
it, each run too). One archive per model, version 1, entry point
kind "pickle", the model's module interned (a module with FACTORY = True:
entry point kind "factory", the server calls its build()). An archive newer than its model
module and the packaging tool is kept (prints "up to date"); --force
rebuilds. Archives are written to a temporary file and renamed, and their
bytes are deterministic, so reruns are idempotent. A model module with a
supported() function that returns a reason (tiny_decoder on PyTorch < 2.4)
is skipped, and the reason printed. A model module with AOTI = True is
also compiled ahead of time by AOTInductor into DIR/<name>_aoti.mpk
(platform torch_aoti) where PyTorch >= 2.6; elsewhere that archive is
skipped with the reason printed.
"""
import argparse
import importlib
import inspect
import os
import sys
import time
import warnings

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MANYPY_PYTHON = os.path.join(REPO, "package_format", "python")

# Every example model, in the order they are packaged.
MODELS = (
    "resnet18",
    "resnet50",
    "vit_small",
    "mobilenet_v3_small",
    "text_classifier",
    "python_heavy",
    "mlp_loop",
    "two_io",
    "numpy_model",
    "fasterrcnn_mobilenet_v3_large_320_fpn",
    "deeplabv3_mobilenet_v3_large",
    "wav2vec2_base",
    "tiny_decoder",
    "char_lm",
    "llama_decoder",
    "detect_and_classify",
    "gru_stream",
    "compiled_mlp",
)


def _setup_path():
    for folder in (MANYPY_PYTHON, HERE):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def load(name):
    """The model module `name` from this folder, imported as a top-level
    module (the name it has inside its archive)."""
    _setup_path()
    return importlib.import_module(name)


def _inputs_mtime(module):
    # Any module of this folder may be a shared helper of the model (interned with it).
    files = [module.__file__] + [os.path.join(HERE, f) for f in os.listdir(HERE) if f.endswith(".py")]
    tool = os.path.join(MANYPY_PYTHON, "manypy")
    files += [os.path.join(tool, f) for f in os.listdir(tool) if f.endswith(".py")]
    return max(os.path.getmtime(f) for f in files)


def package_model(name, out_dir, force=False, torchscript=False, aoti=False):
    """Writes out_dir/<name>.mpk (with torchscript: out_dir/<name>_ts.mpk, the
    model compiled with torch.jit.script for platform torchscript; with aoti:
    out_dir/<name>_aoti.mpk, compiled by AOTInductor for platform torch_aoti);
    returns (path, manifest or None if it was up to date)."""
    _setup_path()
    import manypy.package

    module = load(name)
    archive_name = f"{name}_ts" if torchscript else f"{name}_aoti" if aoti else name
    path = os.path.join(out_dir, f"{archive_name}.mpk")
    if not force and os.path.exists(path) and os.path.getmtime(path) >= _inputs_mtime(module):
        return path, None
    if torchscript:
        import manypy.torchscript
        signature = dict(module.SIGNATURE, description=module.SIGNATURE.get("description", "") +
                         " (TorchScript)")
        return path, manypy.torchscript.export(
            module.build(), path, name=archive_name, version=1,
            example_inputs=module.example_inputs(), **signature)
    if aoti:
        signature = dict(module.SIGNATURE, description=module.SIGNATURE.get("description", "") +
                         " (AOTInductor)")
        return path, manypy.package.export(
            module.build(), path, name=archive_name, version=1, format="aoti",
            example_inputs=module.example_inputs(), **signature)
    more = module.more_example_inputs() if hasattr(module, "more_example_inputs") else None
    if getattr(module, "FACTORY", False):  # the server calls build() (torch.compile'd models)
        return path, manypy.package.export_factory(
            module.__file__, "build", path=path, name=name, version=1,
            example_inputs=module.example_inputs(), more_example_inputs=more, **module.SIGNATURE)
    # A model that calls others (CALLS) cannot run outside the server: its
    # signature is declared, not found by running an example.
    example = None if hasattr(module, "CALLS") else module.example_inputs()
    signature = dict(module.SIGNATURE)
    # A model declared for the OpenAI routes (OPENAI, docs/text-generation.md)
    # says so where the packager takes the declaration.
    if hasattr(module, "OPENAI") and "openai" in inspect.signature(manypy.package.export).parameters:
        signature["openai"] = module.OPENAI
    with warnings.catch_warnings():
        # wav2vec2_base's None second output is left out by design (its docstring).
        warnings.filterwarnings("ignore", message=r"output\(s\) .* None for the example inputs")
        manifest = manypy.package.export(
            module.build(), path, name=name, version=1, example_inputs=example,
            more_example_inputs=more, modules=[module], **signature)
    return path, manifest


def package_aoti(name, out_dir, force):
    """Writes out_dir/<name>_aoti.mpk, or says why this PyTorch cannot."""
    _setup_path()
    import manypy.aoti
    why = manypy.aoti.torch_problem()
    if why:
        print(f"{name + '_aoti':<20} skipped: {why}", flush=True)
        return
    t0 = time.monotonic()
    path, manifest = package_model(name, out_dir, force, aoti=True)
    state = "up to date" if manifest is None else f"{time.monotonic() - t0:.1f} s"
    print(f"{name + '_aoti':<20} {os.path.getsize(path) / 1e6:9.2f} MB  {path}  ({state})",
          flush=True)


def unsupported(name):
    """Why this Python's torch cannot build model `name`, or None."""
    module = load(name)
    return module.supported() if hasattr(module, "supported") else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the model repository folder to fill")
    parser.add_argument("--only", action="append", choices=MODELS, metavar="NAME",
                        help="package only this model (repeatable)")
    parser.add_argument("--force", action="store_true", help="rebuild archives that are up to date")
    parser.add_argument("--torchscript", action="store_true",
                        help="write <name>_ts.mpk for platform torchscript instead (models whose "
                        "inputs are tensors and whose code torch.jit.script compiles)")
    args = parser.parse_args(argv)

    os.makedirs(args.out, exist_ok=True)
    start = time.monotonic()
    for name in args.only or MODELS:
        t0 = time.monotonic()
        why = unsupported(name)
        if why:
            print(f"{name:<20} skipped: {why}", flush=True)
            continue
        path, manifest = package_model(name, args.out, args.force, args.torchscript)
        size = os.path.getsize(path)
        state = "up to date" if manifest is None else f"{time.monotonic() - t0:.1f} s"
        print(f"{name:<20} {size / 1e6:9.2f} MB  {path}  ({state})", flush=True)
        if getattr(load(name), "AOTI", False) and not args.torchscript:
            package_aoti(name, args.out, args.force)
    print(f"model repository {args.out}: {len(args.only or MODELS)} models "
          f"in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
