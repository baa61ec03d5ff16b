"""The fresh process of the load check (load_check.py): loads one archive
with the server's runtime as the server does, warms it up as the server does,
runs the example inputs, and writes what happened.

Run as `/usr/bin/python3 -I load_check_child.py REQUEST.json`: isolated like
the server's interpreters (no PYTHONPATH, no user site-packages, no script or
working folder on sys.path), so the archive gets only what the server's
Python would give it. REQUEST.json holds {"archive", "display" (the path to
name in messages), "runtime_folder" (the folder holding the package
manypy_model_runtime), "serving" (the path of manypy/serving.py, the stand-in
for the server's `manypy`), "examples" (a torch.save'd list of argument
lists, or null), "outputs" (where to torch.save the outputs), "result"
(where to write the JSON result)}.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback

# Taken before the runtime wraps os._exit (its wrapper logs a model's exit as
# the server's).
_exit = os._exit

RUNTIME = "manypy_model_runtime"


def _import_runtime_host(folder):
    """manypy_model_runtime.host, the package imported by name from `folder`
    alone: the rest of that folder (manypy, the packaging tool) stays off
    sys.path, as it is off the server's."""
    spec = importlib.machinery.PathFinder.find_spec(RUNTIME, [folder])
    if spec is None:
        raise ImportError(f"no package {RUNTIME} in {folder}", name=RUNTIME)
    module = importlib.util.module_from_spec(spec)
    sys.modules[RUNTIME] = module
    spec.loader.exec_module(module)
    return importlib.import_module(f"{RUNTIME}.host")


def _import_serving_stand_in(path):
    """manypy/serving.py as the runtime's `manypy`, where no server is: a
    model's nested calls raise its InferenceError."""
    spec = importlib.util.spec_from_file_location("manypy_serving_stand_in", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["manypy_serving_stand_in"] = module
    spec.loader.exec_module(module)
    return module


def _run(request, result):
    stage = "importing the server's runtime"
    try:
        import torch

        host = _import_runtime_host(request["runtime_folder"])
        stand_in = _import_serving_stand_in(request["serving"])
        host.set_serving_api(stand_in)
        manifest = host.read_manifest(request["archive"])
        device = manifest.get("device", "cpu")
        if device != "cpu" and not torch.cuda.is_available():
            result["device_note"] = f"loaded on cpu: the manifest asks for {device}, this machine has no CUDA"
            device = "cpu"
        stage = "loading"
        model, manifest = host.load(request["display"], device=device,
                                    source=request["archive"])
        stage = "warm-up (the server's: zeros from the signature)"
        try:
            host.warmup(model, manifest, device)
        except stand_in.InferenceError:
            pass  # it calls other models (manypy.infer), as the server's warm-up allows
        outputs = []
        if request.get("examples"):
            stage = "reading the examples"
            # Written by the packager that started this process (examples may
            # hold bytes, which PyTorch 2.6's default weights_only refuses).
            examples = torch.load(request["examples"], weights_only=False)
            for i, args in enumerate(examples):
                stage = f"example {i}"
                outputs.append(host.infer(model, manifest, args, device))
        stage = "saving the outputs"
        torch.save(outputs, request["outputs"])
        result["ok"] = True
    except BaseException as e:  # SystemExit from the model included: report, don't vanish
        result.update(ok=False, stage=stage, type=type(e).__name__,
                      module=type(e).__module__, message=str(e),
                      traceback="".join(traceback.format_exception(e)))


def main():
    with open(sys.argv[1]) as f:
        request = json.load(f)
    result = {}
    _run(request, result)
    with open(request["result"], "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)  # the answer is written; threads a model left behind must not hold the process


if __name__ == "__main__":
    main()
