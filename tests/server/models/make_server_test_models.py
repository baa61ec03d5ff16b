#!/usr/bin/python3
"""Packages the server-test models into DIR: echo_all, failing, slow,
keeps_input, spin,
batched_double, tagged_double and echo_rows (empty batches), and as TorchScript (platform torchscript) double_sum_ts and
failing_ts; cuda/needs_cuda and missing_module/needs_missing_module in
folders of their own (models every server here must refuse to load), and
none_output/sometimes_none (an output that may be None); the streaming
models in streaming/ (streaming_models.py); models declared for the OpenAI
routes in openai/ (openai_models.py); models that call models in
composition/ (composition_models.py); the fault-injection
models in faults/ and swap/ (fault_models.py); the models that crash the
process in crashes/ (crash_models.py); in torch_versions/, two_io as
packaged under PyTorch 1.13 (testdata/two_io_torch1_13.mpk, made on Debian
12) and under 2.6 (packaged here; on a torch older than 2.6 its manifest says
2.6.0+debian / Python 3.13.5, as Debian 13's would); in corner_cases/,
configured_affine (config_models.py: a dataclass, a NamedTuple and a
pydantic-style class that look their module up by name) and named_table
(name_lookup_models.py: a load that looks attributes up by names it makes);
AOTInductor archives in aoti/ (PyTorch >= 2.6) and aoti_refused/
(export_aoti_models).

    /usr/bin/python3 tests/server/models/make_server_test_models.py --out DIR
"""
import argparse
import os
import shutil
import sys
import tempfile
import warnings

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path[:0] = [HERE, os.path.join(REPO, "package_format", "python")]

import manypy.package  # noqa: E402
import manypy.torchscript  # noqa: E402
import crash_models  # noqa: E402
import fault_models  # noqa: E402
import streaming_models  # noqa: E402
import composition_models  # noqa: E402
import openai_models  # noqa: E402
import server_test_models as m  # noqa: E402

# For the models made to fail in the server (to test how it fails): the load
# check that export runs would refuse to write them.
MADE_TO_FAIL = {"load_check": False}


def export_needs_missing_module(out):
    """An archive whose model imports a library installed (in a temporary
    site-packages folder) only while it is exported: extern by default, and
    absent from every server's Python."""
    folder = os.path.join(out, "missing_module")
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="manypy-fake-site-") as tmp:
        site = os.path.join(tmp, "site-packages")
        os.makedirs(site)
        with open(os.path.join(site, "manypy_test_installed_lib.py"), "w") as f:
            f.write("def triple(x):\n    return x * 3\n")
        sys.path.insert(0, site)
        try:
            import uses_installed_lib
            import torch
            manypy.package.export(uses_installed_lib.UsesInstalledLib(),
                                  os.path.join(folder, "needs_missing_module.mpk"),
                                  name="needs_missing_module",
                                  inputs=[("INPUT__0", "FP32", [-1])],
                                  outputs=[("OUTPUT__0", "FP32", [-1])],
                                  example_inputs=(torch.ones(4),), **MADE_TO_FAIL)
        finally:
            sys.path.remove(site)
            sys.modules.pop("manypy_test_installed_lib", None)


def export_fault_models(out):
    """faults/: wrong_output, exits, fails_to_load, raises_in_helper and
    fails_in_helper (errors two calls deep in fault_helpers.py), holds_files
    (opens descriptors until told to close them); swap/: scaled versions 1
    (x * 2) and 2 (x * 3), which the archive-replacement tests copy into a
    repository of their own."""
    import torch
    io = {"inputs": [("INPUT__0", "FP32", [-1])], "outputs": [("OUTPUT__0", "FP32", [-1])]}
    faults = os.path.join(out, "faults")
    swap = os.path.join(out, "swap")
    os.makedirs(faults, exist_ok=True)
    os.makedirs(swap, exist_ok=True)
    manypy.package.export(fault_models.WrongOutput(), os.path.join(faults, "wrong_output.mpk"),
                          name="wrong_output", **io)
    manypy.package.export(fault_models.Exits(), os.path.join(faults, "exits.mpk"), name="exits", **io)
    manypy.package.export(fault_models.FailsToLoad(), os.path.join(faults, "fails_to_load.mpk"),
                          name="fails_to_load", **io)
    manypy.package.export(fault_models.RaisesInHelper(), os.path.join(faults, "raises_in_helper.mpk"),
                          name="raises_in_helper", **io)
    manypy.package.export(fault_models.FailsToLoadInHelper(),
                          os.path.join(faults, "fails_in_helper.mpk"), name="fails_in_helper", **io)
    manypy.package.export(fault_models.HoldsFiles(), os.path.join(faults, "holds_files.mpk"),
                          name="holds_files", example_inputs=(torch.zeros(1),), **io)
    for version, factor in ((1, 2.0), (2, 3.0)):
        manypy.package.export(fault_models.Scaled(factor), os.path.join(swap, f"scaled_v{version}.mpk"),
                              name="scaled", version=version, example_inputs=(torch.ones(3),),
                              **io)


def export_crash_models(out):
    """crashes/: null_read (a ctypes null pointer read: SIGSEGV),
    native_abort (libc's abort: SIGABRT) and stack_overflow (a native
    recursion: SIGSEGV on the stack's guard page), each on an input whose
    first element is 1, x * 2 otherwise; crashes_at_load (a null read while it is
    unpickled in the server)."""
    io = {"inputs": [("INPUT__0", "FP32", [-1])], "outputs": [("OUTPUT__0", "FP32", [-1])]}
    crashes = os.path.join(out, "crashes")
    os.makedirs(crashes, exist_ok=True)
    manypy.package.export(crash_models.NullRead(), os.path.join(crashes, "null_read.mpk"),
                          name="null_read", **io)
    manypy.package.export(crash_models.NativeAbort(), os.path.join(crashes, "native_abort.mpk"),
                          name="native_abort", **io)
    manypy.package.export(crash_models.StackOverflow(), os.path.join(crashes, "stack_overflow.mpk"),
                          name="stack_overflow", **io)
    manypy.package.export(crash_models.CrashesAtLoad(), os.path.join(crashes, "crashes_at_load.mpk"),
                          name="crashes_at_load", **io)


def export_torch_versions(out):
    """torch_versions/two_io_torch1_13.mpk (packaged on Debian 12, kept in
    testdata/) and two_io_torch2_6.mpk (packaged now, recording PyTorch 2.6)."""
    import shutil
    import torch
    from manypy import manifest as M
    folder = os.path.join(out, "torch_versions")
    os.makedirs(folder, exist_ok=True)
    shutil.copyfile(os.path.join(HERE, "testdata", "two_io_torch1_13.mpk"),
                    os.path.join(folder, "two_io_torch1_13.mpk"))
    sys.path.insert(0, os.path.join(REPO, "models"))
    import two_io
    real = M.packaging_versions
    have = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if have < (2, 6):
        M.packaging_versions = lambda: dict(real(), torch="2.6.0+debian", python="3.13.5")
    try:
        manypy.package.export(two_io.build(), os.path.join(folder, "two_io_torch2_6.mpk"),
                              name="two_io_torch2_6", example_inputs=two_io.example_inputs(),
                              modules=[two_io], **two_io.SIGNATURE)
    finally:
        M.packaging_versions = real


def export_streaming_models(out):
    """streaming/: ticker (its streaming detected from its example's
    generator), raises_after_three and wrong_type (detected from forward
    being a generator function), batched_counter (continuous batching)."""
    import torch
    folder = os.path.join(out, "streaming")
    os.makedirs(folder, exist_ok=True)
    one = lambda name: (name, "INT64", [1])  # noqa: E731
    manypy.package.export(
        streaming_models.Ticker(), os.path.join(folder, "ticker.mpk"), name="ticker",
        inputs=[one("COUNT"), one("DELAY_MS"), one("SIZE"), ("MARKER", "BYTES", [1])],
        outputs=[("INDEX", "INT64", [1]), ("DATA", "FP32", [-1])],
        example_inputs=(torch.tensor([2]), torch.tensor([0]), torch.tensor([3]), [b""]))
    io = {"inputs": [("INPUT__0", "FP32", [-1])], "outputs": [("OUTPUT__0", "FP32", [-1])]}
    manypy.package.export(streaming_models.RaisesAfterThree(),
                          os.path.join(folder, "raises_after_three.mpk"),
                          name="raises_after_three", **io)
    manypy.package.export(streaming_models.WrongType(), os.path.join(folder, "wrong_type.mpk"),
                          name="wrong_type", **io)
    manypy.package.export(
        streaming_models.BatchedCounter(), os.path.join(folder, "batched_counter.mpk"),
        name="batched_counter", inputs=[one("COUNT"), one("FAIL_AT"), one("STEP_MS")],
        outputs=[("INDEX", "INT64", [1]), ("BATCH", "INT64", [1])],
        example_inputs=(torch.tensor([2]), torch.tensor([-1]), torch.tensor([0])))


def export_openai_models(out):
    """openai/: byte_writer (completions and chat, every field mapped),
    one_shot (completions, not a generator) and embedder (embeddings)."""
    import torch
    folder = os.path.join(out, "openai")
    os.makedirs(folder, exist_ok=True)
    text = lambda name: (name, "BYTES", [1])  # noqa: E731
    one = lambda name, datatype: (name, datatype, [1])  # noqa: E731
    manypy.package.export(
        openai_models.ByteWriter(), os.path.join(folder, "byte_writer.mpk"), name="byte_writer",
        inputs=[text("PROMPT"), text("MESSAGES"), one("MAX_TOKENS", "INT64"),
                one("TEMPERATURE", "FP32"), one("TOP_P", "FP32"), ("STOP", "BYTES", [-1]),
                one("SEED", "INT64")],
        outputs=[text("TEXT"), text("FINISH_REASON"), one("COMPLETION_TOKENS", "INT64"),
                 one("PROMPT_TOKENS", "INT64")],
        example_inputs=([b"hi"], [b""], torch.tensor([3]), torch.tensor([1.0]),
                        torch.tensor([1.0]), [b"!"], torch.tensor([-1])),
        openai={"routes": ["completions", "chat/completions"],
                "inputs": {"prompt": "PROMPT", "messages": "MESSAGES", "max_tokens": "MAX_TOKENS",
                           "temperature": "TEMPERATURE", "top_p": "TOP_P", "stop": "STOP",
                           "seed": "SEED"},
                "outputs": {"text": "TEXT", "finish_reason": "FINISH_REASON",
                            "completion_tokens": "COMPLETION_TOKENS",
                            "prompt_tokens": "PROMPT_TOKENS"}})
    manypy.package.export(
        openai_models.OneShot(), os.path.join(folder, "one_shot.mpk"), name="one_shot",
        inputs=[text("PROMPT")], outputs=[text("TEXT")], example_inputs=([b"hi"],),
        openai={"routes": ["completions"], "inputs": {"prompt": "PROMPT"},
                "outputs": {"text": "TEXT"}})
    manypy.package.export(
        openai_models.Embedder(), os.path.join(folder, "embedder.mpk"), name="embedder",
        inputs=[("INPUT", "BYTES", [-1])],
        outputs=[("EMBEDDING", "FP32", [-1, 8]), one("PROMPT_TOKENS", "INT64")],
        example_inputs=([b"a", b"bc"],),
        openai={"routes": ["embeddings"], "inputs": {"input": "INPUT"},
                "outputs": {"embedding": "EMBEDDING", "prompt_tokens": "PROMPT_TOKENS"}})


def export_composition_models(out):
    """composition/: double, slow_double and the models that call them
    (composition_models.py). Those that call other models are packaged
    without example inputs: outside the server there is no model to call."""
    folder = os.path.join(out, "composition")
    os.makedirs(folder, exist_ok=True)
    io = {"inputs": [("INPUT__0", "FP32", [-1])], "outputs": [("OUTPUT__0", "FP32", [-1])]}
    c = composition_models
    for name, model in (("double", c.Double()), ("slow_double", c.SlowDouble()),
                        ("calls_double", c.CallsDouble()), ("fan_out", c.FanOut()),
                        ("cycle_a", c.CycleA()), ("cycle_b", c.CycleB())):
        manypy.package.export(model, os.path.join(folder, f"{name}.mpk"), name=name, **io)
    manypy.package.export(c.Probe(), os.path.join(folder, "probe.mpk"), name="probe",
                          inputs=[("MODE", "BYTES", [1]), ("INPUT__0", "FP32", [-1])],
                          outputs=[("RESULT", "BYTES", [1])])


def export_aoti_models(out):
    """aoti/ (PyTorch >= 2.6 only: AOTInductor compiles there): double_sum_aoti,
    DoubleAndSum compiled ahead of time (platform torch_aoti), batched
    dynamically up to 16; calls_aoti, a Python model that calls it
    (composition_models.py); beside them, for the cases that need another
    model in the same repository, slow (a copy of ./slow.mpk: it holds an
    interpreter while AOTI requests queue) and linear_1mib, a Python
    nn.Linear(512, 512) with 1 MiB of seeded weights (what a memory budget
    evicts for, or evicts). aoti_refused/ (every PyTorch):
    compiled_by_2_5_1, a torch_aoti archive whose manifest says PyTorch 2.5.1,
    which every server here refuses for its version before reading its
    package (its bytes are not one); and on 2.6 not_a_package, the same
    recording this PyTorch, which the loader itself refuses."""
    import torch
    import manypy.aoti
    from manypy import manifest as M
    refused = os.path.join(out, "aoti_refused")
    os.makedirs(refused, exist_ok=True)
    versions = [("compiled_by_2_5_1", dict(M.packaging_versions(), torch="2.5.1", python="3.12.8"))]
    if manypy.aoti.torch_problem() is None:
        versions.append(("not_a_package", M.packaging_versions()))
    for name, packaged_with in versions:
        manifest = M.build_manifest(
            name, 1, {"kind": "aoti", "package": "model", "resource": "model.pt2"},
            [("X", "FP32", [3])], [("DOUBLE", "FP32", [3]), ("SUM", "FP32", [1])],
            max_batch_size=16, platform=M.AOTI_PLATFORM, packaged_with=packaged_with)

        def write(exporter, manifest=manifest):
            exporter.save_text(M.MANIFEST_PACKAGE, M.MANIFEST_RESOURCE, M.dumps(manifest))
            exporter.save_binary("model", "model.pt2", b"not an AOTInductor package")

        manypy.package._write_archive(os.path.join(refused, f"{name}.mpk"), write, None, None)
    if manypy.aoti.torch_problem() is not None:
        print(f"aoti/ skipped: {manypy.aoti.torch_problem()}")
        return
    folder = os.path.join(out, "aoti")
    os.makedirs(folder, exist_ok=True)
    manypy.package.export(m.DoubleAndSum(), os.path.join(folder, "double_sum_aoti.mpk"),
                          name="double_sum_aoti", format="aoti", inputs=[("X", "FP32", [3])],
                          example_inputs=(torch.tensor([[1.0, 2.0, 3.0]]),), max_batch_size=16,
                          batching={"dynamic": True, "max_queue_delay_microseconds": 2000})
    manypy.package.export(composition_models.CallsAoti(), os.path.join(folder, "calls_aoti.mpk"),
                          name="calls_aoti", inputs=[("X", "FP32", [-1, 3])],
                          outputs=[("SUM", "FP32", [-1, 1])])
    shutil.copyfile(os.path.join(out, "slow.mpk"), os.path.join(folder, "slow.mpk"))
    linear = torch.nn.Linear(512, 512, bias=False)
    with torch.no_grad():  # random: the archive does not compress below 1 MiB
        linear.weight.copy_(torch.randn(512, 512, generator=torch.Generator().manual_seed(41)))
    manypy.package.export(linear.eval(), os.path.join(folder, "linear_1mib.mpk"), name="linear_1mib",
                          inputs=[("INPUT__0", "FP32", [512])], outputs=[("OUTPUT__0", "FP32", [512])],
                          example_inputs=(torch.ones(1, 512),), max_batch_size=8)


def export_corner_cases(out):
    """corner_cases/configured_affine.mpk (config_models.py): module-level
    code that finds its module in sys.modules (issue 28);
    corner_cases/named_table.mpk (name_lookup_models.py): a load that looks
    attributes up by names it makes."""
    import torch
    import config_models
    import name_lookup_models
    folder = os.path.join(out, "corner_cases")
    os.makedirs(folder, exist_ok=True)
    manypy.package.export(config_models.ConfiguredAffine(),
                          os.path.join(folder, "configured_affine.mpk"), name="configured_affine",
                          inputs=[("INPUT__0", "FP32", [-1])], example_inputs=(torch.ones(3),))
    manypy.package.export(name_lookup_models.NamedTable(),
                          os.path.join(folder, "named_table.mpk"), name="named_table",
                          inputs=[("INPUT__0", "FP32", [-1])], example_inputs=(torch.ones(3),))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    specs = [(f"IN_{dt}", dt, [-1]) for dt in m.DATATYPES]
    manypy.package.export(m.EchoAll(), os.path.join(out, "echo_all.mpk"), name="echo_all",
                          inputs=specs, outputs=[(f"OUT_{dt}", dt, [-1]) for dt in m.DATATYPES])
    manypy.package.export(m.Failing(), os.path.join(out, "failing.mpk"), name="failing",
                          inputs=[("INPUT__0", "FP32", [-1])], outputs=[("OUTPUT__0", "FP32", [-1])])
    manypy.package.export(m.Slow(), os.path.join(out, "slow.mpk"), name="slow",
                          inputs=[("MS", "INT64", [1])], outputs=[("MS", "INT64", [1])],
                          max_batch_size=8)
    manypy.package.export(m.KeepsInput(), os.path.join(out, "keeps_input.mpk"), name="keeps_input",
                          inputs=[("X", "FP32", [-1])], outputs=[("Y", "FP32", [-1])],
                          load_check=False)  # its output depends on the call before
    manypy.package.export(m.Spin(), os.path.join(out, "spin.mpk"), name="spin",
                          inputs=[("INPUT__0", "FP32", [-1])], outputs=[("OUTPUT__0", "FP32", [-1])])
    manypy.package.export(m.BatchedDouble(), os.path.join(out, "batched_double.mpk"),
                          name="batched_double", inputs=[("X", "FP32", [2])],
                          outputs=[("Y", "FP32", [2])], max_batch_size=16,
                          batching={"dynamic": True, "max_queue_delay_microseconds": 2000})
    # Empty batches (docs/packaging.md#empty-batches): answered from the signature,
    # and run by the model.
    manypy.package.export(m.TaggedDouble(), os.path.join(out, "tagged_double.mpk"),
                          name="tagged_double", inputs=[("X", "FP32", [3])],
                          outputs=[("Y", "FP32", [3]), ("TAG", "BYTES", [1])], max_batch_size=8,
                          batching={"dynamic": True, "max_queue_delay_microseconds": 1000})
    manypy.package.export(m.EchoRows(), os.path.join(out, "echo_rows.mpk"), name="echo_rows",
                          inputs=[("X", "FP32", [-1]), ("T", "BYTES", [1])],
                          outputs=[("Y", "FP32", [-1]), ("U", "BYTES", [1])], max_batch_size=8,
                          batching={"dynamic": True, "max_queue_delay_microseconds": 1000})
    manypy.torchscript.export(m.DoubleAndSum(), os.path.join(out, "double_sum_ts.mpk"),
                              name="double_sum_ts", inputs=[("X", "FP32", [3])],
                              outputs=[("DOUBLE", "FP32", [3]), ("SUM", "FP32", [1])],
                              max_batch_size=16,
                              batching={"dynamic": True, "max_queue_delay_microseconds": 2000})
    manypy.torchscript.export(m.Failing(), os.path.join(out, "failing_ts.mpk"), name="failing_ts",
                              inputs=[("INPUT__0", "FP32", [-1])],
                              outputs=[("OUTPUT__0", "FP32", [-1])])
    # Its own folder: a model this server's CPU-only libtorch must refuse to load.
    os.makedirs(os.path.join(out, "cuda"), exist_ok=True)
    manypy.package.export(m.Failing(), os.path.join(out, "cuda", "needs_cuda.mpk"),
                          name="needs_cuda", inputs=[("INPUT__0", "FP32", [-1])],
                          outputs=[("OUTPUT__0", "FP32", [-1])], device="cuda")
    export_needs_missing_module(out)
    # Its own folder: only the test of None outputs loads it.
    os.makedirs(os.path.join(out, "none_output"), exist_ok=True)
    import torch
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the left-out output is the point
        manifest = manypy.package.export(
            m.SometimesNone(), os.path.join(out, "none_output", "sometimes_none.mpk"),
            name="sometimes_none", example_inputs=(torch.ones(3),),
            dynamic_dims={"INPUT__0": [0], "OUTPUT__0": [0]})
    assert [o["name"] for o in manifest["outputs"]] == ["OUTPUT__0"], manifest["outputs"]
    export_fault_models(out)
    export_crash_models(out)
    export_streaming_models(out)
    export_openai_models(out)
    export_composition_models(out)
    export_torch_versions(out)
    export_corner_cases(out)
    export_aoti_models(out)
    print(f"wrote echo_all, failing, slow, keeps_input, spin, batched_double, tagged_double, echo_rows, "
          f"double_sum_ts, failing_ts, "
          f"cuda/needs_cuda, missing_module/needs_missing_module, none_output/sometimes_none, "
          f"openai/{{byte_writer,one_shot,embedder}}, "
          f"faults/{{wrong_output,exits,fails_to_load}}, swap/scaled_v{{1,2}}, "
          f"torch_versions/two_io_torch{{1_13,2_6}}, corner_cases/{{configured_affine,named_table}}, "
          f"aoti/{{double_sum_aoti,calls_aoti,slow,linear_1mib}} (PyTorch >= 2.6), aoti_refused/ "
          f"to {out}")


if __name__ == "__main__":
    main()
