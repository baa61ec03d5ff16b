"""manypy.manifest: building manifests and rejecting bad ones, naming the field."""
import copy
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "package_format", "python"))

from manypy import manifest as M  # noqa: E402
from manypy.manifest_tensors import parse_tensor_arg  # noqa: E402

GOOD = {
    "schema_version": 1,
    "name": "resnet18",
    "version": 1,
    "platform": "manypy_python",
    "entry_point": {"kind": "pickle", "package": "model", "resource": "model.pkl"},
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [3, 224, 224]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [1000]}],
    "max_batch_size": 8,
    "batching": {"dynamic": True, "preferred_batch_sizes": [4, 8], "max_queue_delay_microseconds": 500},
    "instance_count": 0,
    "device": "cpu",
    "description": "torchvision resnet18, random weights",
}


class ManifestTest(unittest.TestCase):
    def bad(self, field, mutate):
        m = copy.deepcopy(GOOD)
        mutate(m)
        with self.assertRaises(ValueError) as ctx:
            M.validate_manifest(m)
        self.assertTrue(str(ctx.exception).startswith(field + ":"),
                        f"expected an error naming {field!r}, got {ctx.exception}")
        return str(ctx.exception)

    def test_schema_example_is_valid(self):
        self.assertEqual(M.validate_manifest(copy.deepcopy(GOOD)), GOOD)
        minimal = {k: GOOD[k] for k in ("schema_version", "name", "version", "platform",
                                         "entry_point", "inputs", "outputs")}
        M.validate_manifest(minimal)

    def test_schema_2_records_what_the_archive_was_packaged_with(self):
        v2 = dict(copy.deepcopy(GOOD), schema_version=2,
                  packaged_with={"torch": "2.6.0+debian", "python": "3.13.5", "manypy": "0.1.0"})
        self.assertEqual(M.validate_manifest(copy.deepcopy(v2)), v2)
        self.bad("packaged_with", lambda m: m.update(schema_version=2))  # missing in 2
        self.bad("packaged_with", lambda m: m.update(packaged_with=v2["packaged_with"]))  # not in 1
        for key in ("torch", "python", "manypy"):
            m = copy.deepcopy(v2)
            del m["packaged_with"][key]
            with self.assertRaisesRegex(ValueError, f"^packaged_with.{key}: required"):
                M.validate_manifest(m)
            m = copy.deepcopy(v2)
            m["packaged_with"][key] = "new"
            with self.assertRaisesRegex(ValueError, f"^packaged_with.{key}: invalid value 'new'"):
                M.validate_manifest(m)
        m = copy.deepcopy(v2)
        m["packaged_with"]["cuda"] = "12.4"
        with self.assertRaisesRegex(ValueError, "^packaged_with.cuda: unknown field"):
            M.validate_manifest(m)

    def test_build_manifest_records_this_pythons_versions(self):
        import platform
        import torch
        m = M.build_manifest("net", 1, {"kind": "pickle"}, [("X", "FP32", [4])], [("Y", "FP32", [4])])
        self.assertEqual(m["schema_version"], 2)
        self.assertEqual(m["packaged_with"]["torch"], torch.__version__)
        self.assertEqual(m["packaged_with"]["python"], platform.python_version())
        self.assertEqual(m["packaged_with"]["manypy"], __import__("manypy").__version__)

    def test_bad_datatype(self):
        msg = self.bad("inputs[0].datatype", lambda m: m["inputs"][0].update(datatype="FP33"))
        self.assertIn("FP33", msg)
        self.bad("outputs[0].datatype", lambda m: m["outputs"][0].update(datatype="float32"))

    def test_duplicate_input_names(self):
        def dup(m):
            m["inputs"].append({"name": "INPUT__0", "datatype": "INT64", "shape": [2]})
        msg = self.bad("inputs[1].name", dup)
        self.assertIn("duplicate", msg)

    def test_unknown_fields(self):
        msg = self.bad("max_batch_sise", lambda m: m.update(max_batch_sise=4))
        self.assertIn("unknown field", msg)
        self.bad("inputs[0].dims", lambda m: m["inputs"][0].update(dims=[1]))
        self.bad("batching.dynamic_batching", lambda m: m["batching"].update(dynamic_batching=True))
        self.bad("entry_point.module", lambda m: m["entry_point"].update(module="x"))

    def test_bad_shapes(self):
        self.bad("inputs[0].shape", lambda m: m["inputs"][0].update(shape=[3, 0, 224]))
        self.bad("inputs[0].shape", lambda m: m["inputs"][0].update(shape=[-2]))
        self.bad("outputs[0].shape", lambda m: m["outputs"][0].update(shape="1000"))
        self.bad("outputs[0].shape", lambda m: m["outputs"][0].update(shape=[1000.0]))
        self.bad("outputs[0].shape", lambda m: m["outputs"][0].update(shape=[True]))
        m = copy.deepcopy(GOOD)
        m["inputs"][0]["shape"] = [-1, 224]
        M.validate_manifest(m)

    def test_required_and_typed_fields(self):
        self.bad("name", lambda m: m.pop("name"))
        self.bad("name", lambda m: m.update(name=".hidden"))
        self.bad("name", lambda m: m.update(name="a/b"))
        self.bad("name", lambda m: m.update(name="x" * 129))
        self.bad("version", lambda m: m.update(version=0))
        self.bad("version", lambda m: m.update(version="1"))
        self.bad("schema_version", lambda m: m.update(schema_version=3))
        self.bad("platform", lambda m: m.update(platform="pytorch_libtorch"))
        self.bad("entry_point.kind", lambda m: m.update(platform="torchscript"))
        self.bad("entry_point.kind",
                 lambda m: m.update(entry_point={"kind": "torchscript", "resource": "model.pt"}))
        self.bad("inputs", lambda m: m.update(inputs=[]))
        self.bad("outputs", lambda m: m.pop("outputs"))
        self.bad("inputs[0].name", lambda m: m["inputs"][0].update(name="bad name"))
        self.bad("max_batch_size", lambda m: m.update(max_batch_size=-1))
        self.bad("max_batch_size", lambda m: m.update(max_batch_size=65537))
        self.bad("instance_count", lambda m: m.update(instance_count=-1))
        self.bad("device", lambda m: m.update(device="tpu"))
        self.bad("description", lambda m: m.update(description=3))
        self.bad("method", lambda m: m.update(method="not valid"))

    def test_entry_point(self):
        self.bad("entry_point.kind", lambda m: m.update(entry_point={"kind": "torchscript"}))
        self.bad("entry_point.module", lambda m: m.update(entry_point={"kind": "factory", "function": "f"}))
        self.bad("entry_point.resource",
                 lambda m: m.update(entry_point={"kind": "pickle", "resource": "../x.pkl"}))
        self.bad("entry_point.weights.resource", lambda m: m.update(entry_point={
            "kind": "factory", "module": "net", "function": "build", "weights": {"package": "manypy"}}))
        m = copy.deepcopy(GOOD)
        m["entry_point"] = {"kind": "factory", "module": "pkg.net", "function": "build",
                            "weights": {"package": "manypy", "resource": "weights.pkl"}}
        M.validate_manifest(m)

    def test_batching(self):
        def no_batch(m):
            m["max_batch_size"] = 0
        self.bad("batching.dynamic", no_batch)
        self.bad("batching.preferred_batch_sizes",
                 lambda m: m["batching"].update(preferred_batch_sizes=[16]))
        self.bad("batching.max_queue_delay_microseconds",
                 lambda m: m["batching"].update(max_queue_delay_microseconds=-5))

    def test_response_cache(self):
        io = ({"kind": "pickle"}, [("X", "FP32", [4])], [("Y", "FP32", [4])])
        self.assertNotIn("response_cache", M.build_manifest("net", 1, *io))  # only when set
        self.assertTrue(M.build_manifest("net", 1, *io, response_cache=True)["response_cache"])
        self.bad("response_cache", lambda m: m.update(response_cache="yes"))
        with self.assertRaisesRegex(ValueError, r"^streaming: .*cannot be cached"):
            M.build_manifest("net", 1, *io, streaming=True, response_cache=True)

    def test_sequence_batching(self):
        io = ({"kind": "pickle"}, [("X", "FP32", [4])], [("Y", "FP32", [4])])
        self.assertNotIn("sequence_batching", M.build_manifest("net", 1, *io))  # only when set
        self.assertEqual(M.build_manifest("net", 1, *io, sequence_batching=True)["sequence_batching"], {})
        m = M.build_manifest("net", 1, *io, sequence_batching={"max_sequence_idle_microseconds": 5,
                                                               "max_concurrent_sequences": 2})
        self.assertEqual(m["sequence_batching"]["max_concurrent_sequences"], 2)
        self.bad("sequence_batching", lambda m: m.update(sequence_batching=[]))
        self.bad("sequence_batching.oldest", lambda m: m.update(sequence_batching={"oldest": 1}))
        self.bad("sequence_batching.max_sequence_idle_microseconds",
                 lambda m: m.update(sequence_batching={"max_sequence_idle_microseconds": 0}))
        with self.assertRaisesRegex(ValueError, r"^sequence_batching: .*cannot also batch dynamically"):
            M.build_manifest("net", 1, *io, max_batch_size=4, batching={"dynamic": True},
                             sequence_batching=True)
        with self.assertRaisesRegex(ValueError, r"^sequence_batching: a streaming model"):
            M.build_manifest("net", 1, *io, streaming=True, sequence_batching=True)
        with self.assertRaisesRegex(ValueError, r"^sequence_batching: .*cannot be cached"):
            M.build_manifest("net", 1, *io, response_cache=True, sequence_batching=True)

    def test_openai(self):
        """The `openai` declaration (docs/text-generation.md), checked against the signature;
        the same rules as package_format/openai_spec.cc (tests/package_format/openai_spec_test.cc)."""
        io = ({"kind": "pickle"}, [("PROMPT", "BYTES", [1]), ("LIMIT", "INT64", [1])],
              [("TEXT", "BYTES", [1]), ("VECTORS", "FP32", [-1, 4])])
        declared = {"routes": ("completions",), "inputs": {"prompt": "PROMPT", "max_tokens": "LIMIT"},
                    "outputs": {"text": "TEXT"}}
        self.assertNotIn("openai", M.build_manifest("net", 1, *io))  # only when set
        m = M.build_manifest("net", 1, *io, openai=declared)
        self.assertEqual(m["openai"], {"routes": ["completions"],
                                       "inputs": {"max_tokens": "LIMIT", "prompt": "PROMPT"},
                                       "outputs": {"text": "TEXT"}})
        self.assertEqual(M.loads(M.dumps(m)), m)

        def refused(change, field, says):
            bad = copy.deepcopy(declared)
            change(bad)
            with self.assertRaises(ValueError) as ctx:
                M.build_manifest("net", 1, *io, openai=bad)
            self.assertTrue(str(ctx.exception).startswith(f"openai.{field}: "), str(ctx.exception))
            self.assertIn(says, str(ctx.exception))

        refused(lambda d: d.update(routes=["chat"]), "routes[0]", "unknown route 'chat'")
        refused(lambda d: d.update(routes=[]), "routes", "at least one route")
        refused(lambda d: d["inputs"].update(max_tokens="LIMITS"), "inputs.max_tokens",
                "route 'completions': 'LIMITS' is not an input of the model (its inputs: PROMPT and LIMIT)")
        refused(lambda d: d["inputs"].update(stop="PROMPT"), "inputs.stop",
                "route 'completions': input 'PROMPT' is mapped twice")
        refused(lambda d: d["inputs"].pop("prompt"), "inputs.prompt",
                "route 'completions' needs the input 'prompt' mapped")
        refused(lambda d: d["inputs"].update(temperature="LIMIT", max_tokens=None) or
                d["inputs"].pop("max_tokens"), "inputs.temperature",
                "route 'completions': input 'LIMIT' is INT64, expected FP32 or FP64")
        refused(lambda d: d["outputs"].update(text="VECTORS"), "outputs.text",
                "output 'VECTORS' is FP32, expected BYTES")
        refused(lambda d: d["inputs"].pop("max_tokens"), "inputs",
                "the model's input 'LIMIT' is mapped to no request field")
        refused(lambda d: d.update(routes=["completions", "embeddings"]), "inputs.input",
                "route 'embeddings' needs the input 'input' mapped")
        refused(lambda d: d["outputs"].update(usage="TEXT"), "outputs.usage", "unknown field")

    def test_build_manifest_accepts_tuples_and_names_bad_specs(self):
        m = M.build_manifest("net", 2, {"kind": "pickle"}, [("X", "fp32", (4,))],
                             [{"name": "Y", "datatype": "INT64", "shape": []}], max_batch_size=4,
                             batching=True)
        self.assertEqual(m["inputs"], [{"name": "X", "datatype": "FP32", "shape": [4]}])
        self.assertEqual(m["batching"], {"dynamic": True})
        with self.assertRaisesRegex(ValueError, r"^outputs\[0\]\.datatype:"):
            M.build_manifest("net", 1, {"kind": "pickle"}, [("X", "FP32", [4])], [("Y", "F32", [4])])
        with self.assertRaisesRegex(ValueError, r"^inputs\[0\]:"):
            M.build_manifest("net", 1, {"kind": "pickle"}, [("X", "FP32")], [("Y", "FP32", [4])])

    def test_parse_tensor_arg(self):
        self.assertEqual(parse_tensor_arg("INPUT__0:FP32:3,224,224"),
                         {"name": "INPUT__0", "datatype": "FP32", "shape": [3, 224, 224]})
        self.assertEqual(parse_tensor_arg("a:b:int64:-1"),
                         {"name": "a:b", "datatype": "INT64", "shape": [-1]})
        with self.assertRaisesRegex(ValueError, r"shape"):
            parse_tensor_arg("X:FP32:3,x")

    def test_dumps_round_trip(self):
        self.assertEqual(M.loads(M.dumps(GOOD)), GOOD)
        self.assertEqual(M.loads(M.dumps(GOOD).encode()), GOOD)
        with self.assertRaisesRegex(ValueError, r"^manifest: not valid JSON"):
            M.loads("{")
        with self.assertRaisesRegex(ValueError, r"^manifest: not valid JSON.*recursion"):
            M.loads("[" * 1_000_000 + "]" * 1_000_000)  # a RecursionError in json, not a crash


if __name__ == "__main__":
    unittest.main()
