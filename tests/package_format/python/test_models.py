"""The example models in models/: each builds, runs one eager forward on
inputs matching its declared signature, and returns outputs matching it;
small ones also go through models/make_repository.py and back."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
MODELS_DIR = os.path.join(REPO, "models")
sys.path.insert(0, os.path.join(REPO, "package_format", "python"))
sys.path.insert(0, MODELS_DIR)

import torch  # noqa: E402

import make_repository  # noqa: E402
import manypy.package as P  # noqa: E402
from manypy import manifest as M  # noqa: E402

_DTYPES = {"FP32": torch.float32, "FP16": torch.float16, "FP64": torch.float64, "INT64": torch.int64,
           "INT32": torch.int32, "BOOL": torch.bool, "UINT8": torch.uint8}


def bytes_shape(value):
    if isinstance(value, (bytes, str)):
        return []
    return [len(value)] + bytes_shape(value[0])


def served_values(result, names):
    """The outputs the server takes from a model's result (SCHEMA.md's calling
    convention): a list holding one dict is that dict; a dict by key; a tuple
    or list by position, or by the NAME__<index> suffix when it has more
    elements than the manifest declares outputs."""
    if isinstance(result, (tuple, list)) and len(result) == 1 and isinstance(result[0], dict):
        result = result[0]
    if isinstance(result, dict):
        assert set(names) <= set(result), (names, list(result))
        return [result[n] for n in names]
    if isinstance(result, (tuple, list)):
        if len(result) == len(names):
            return list(result)
        return [result[int(n.rsplit("__", 1)[1])] for n in names]
    return [result]


class ExampleModelsTest(unittest.TestCase):
    def check_value(self, spec, value, batch, what):
        shape = ([batch] if batch is not None else []) + spec["shape"]
        if spec["datatype"] == "BYTES":
            self.assertIsInstance(value, list, what)
            got = bytes_shape(value)
        else:
            self.assertIsInstance(value, torch.Tensor, what)
            self.assertEqual(value.dtype, _DTYPES[spec["datatype"]], what)
            got = list(value.shape)
        self.assertEqual(len(got), len(shape), f"{what}: shape {got} vs declared {shape}")
        for g, d in zip(got, shape):
            self.assertTrue(d == -1 or g == d, f"{what}: shape {got} vs declared {shape}")

    def check_model(self, name, batch_size):
        module = make_repository.load(name)
        self.assertTrue(module.__doc__ and module.__doc__.startswith(name + ":"), f"{name}: docstring")
        sig = module.SIGNATURE
        inputs = M.tensor_specs(sig["inputs"], "inputs")
        outputs = M.tensor_specs(sig["outputs"], "outputs")
        batched = sig.get("max_batch_size", 0) > 0
        batch = batch_size if batched else None
        args = module.example_inputs(batch_size) if batched else module.example_inputs()
        self.assertEqual(len(args), len(inputs))
        for spec, value in zip(inputs, args):
            self.check_value(spec, value, batch, f"{name} input {spec['name']}")

        model = module.build()
        self.assertFalse(model.training, f"{name}: build() must return an eval() model")
        with torch.inference_mode():
            result = model(*args)
        values = served_values(result, [o["name"] for o in outputs])
        self.assertEqual(len(values), len(outputs), name)
        for spec, value in zip(outputs, values):
            self.check_value(spec, value, batch, f"{name} output {spec['name']}")
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                self.assertTrue(torch.isfinite(value).all(), f"{name}: non-finite output")
        # The signature is a valid manifest signature.
        M.build_manifest(name, 1, {"kind": "pickle"}, sig["inputs"], sig["outputs"],
                         max_batch_size=sig.get("max_batch_size", 0), batching=sig.get("batching"))
        return model, args, result

    def test_every_model_is_listed(self):
        files = sorted(f[:-3] for f in os.listdir(MODELS_DIR)
                       if f.endswith(".py") and f != "make_repository.py" and not f.startswith("_"))
        self.assertEqual(sorted(make_repository.MODELS), files)

    def test_resnet18(self):
        self.check_model("resnet18", 2)

    def test_resnet50(self):
        self.check_model("resnet50", 1)  # slow on CPU: one forward, batch 1

    def test_vit_small(self):
        model, args, result = self.check_model("vit_small", 2)
        # The benchmarks serve it as TorchScript too: scripted, it computes the same.
        import manypy.torchscript as T
        scripted = T.compile_model(model)
        with torch.inference_mode():
            self.assertTrue(torch.allclose(scripted(*args), result, atol=1e-5))

    def test_mobilenet_v3_small(self):
        self.check_model("mobilenet_v3_small", 2)

    def test_text_classifier(self):
        model, args, result = self.check_model("text_classifier", 3)
        module = make_repository.load("text_classifier")
        # The tokenizer is stable (not Python's salted hash) and case-insensitive.
        self.assertEqual(module.fnv1a_32(b"hello"), 0x4F9F2CAB)
        self.assertEqual(module.tokenize(b"Hello, WORLD!"), module.tokenize("hello world"))
        self.assertEqual(len(module.tokenize("x " * 500)), module.MAX_TOKENS)
        # A text's logits do not depend on the other texts in its batch (padding is masked).
        with torch.inference_mode():
            alone = model([args[0][1]])
        self.assertTrue(torch.allclose(alone[0], result[1], atol=1e-5))

    def test_python_heavy(self):
        self.check_model("python_heavy", 4)

    def test_mlp_loop(self):
        _, _, result = self.check_model("mlp_loop", 5)
        self.assertEqual(tuple(result.shape), (5, 64))
        self.assertTrue(bool((result >= 0).all()))  # the last layer is a ReLU

    def test_compiled_mlp(self):
        why = make_repository.unsupported("compiled_mlp")
        if why:
            self.skipTest(why)  # PyTorch 1.x: no torch.compile
        model, args, result = self.check_model("compiled_mlp", 3)
        # Compiled (Inductor), it computes what the module it wraps computes eagerly.
        self.assertIsInstance(model, torch._dynamo.eval_frame.OptimizedModule)
        with torch.inference_mode():
            self.assertTrue(torch.allclose(result, model._orig_mod(*args), atol=1e-5))

    def test_tiny_decoder(self):
        module = make_repository.load("tiny_decoder")
        why = module.supported()
        if why:
            self.assertLess(tuple(int(p) for p in torch.__version__.split(".")[:2]), (2, 4))
            self.assertIn("needs PyTorch >= 2.4", why)
            print(f"\ntest_tiny_decoder skipped: {why}", flush=True)
            self.skipTest(why)
        model, args, result = self.check_model("tiny_decoder", 2)
        self.assertEqual(tuple(result.shape), (2, 12, 256))
        # Causal: the logits of a prefix do not depend on the tokens after it.
        with torch.inference_mode():
            prefix = model(args[0][:, :5])
        self.assertTrue(torch.allclose(prefix, result[:, :5], atol=1e-5))
        # Rotary embeddings make it order-sensitive (attention alone would not be).
        with torch.inference_mode():
            swapped = model(args[0].flip(1))
        self.assertFalse(torch.allclose(swapped[:, -1], result[:, 0], atol=1e-3))

    def test_detect_and_classify_crops(self):
        module = make_repository.load("detect_and_classify")
        self.assertTrue(module.__doc__.startswith("detect_and_classify:"))
        self.assertEqual(set(module.CALLS) <= set(make_repository.MODELS), True)
        (image,) = module.example_inputs()
        boxes = torch.tensor([[0.0, 0.0, 200.0, 160.0], [10.2, 20.7, 10.4, 20.9], [-5, -5, 500, 500]])
        out = module.crops(image, boxes)
        self.assertEqual(list(out.shape), [3, 3, module.CROP, module.CROP])
        # The whole image, resized, is the first crop; a sub-pixel box still has a pixel.
        whole = torch.nn.functional.interpolate(image, size=(224, 224), mode="bilinear",
                                                align_corners=False)
        self.assertTrue(torch.equal(out[0], whole[0]))
        self.assertTrue(torch.equal(out[2], whole[0]))
        # Outside the server there is nothing to call: the stand-in says so.
        import manypy
        with self.assertRaises(manypy.InferenceError):
            module.build()(image)

    def test_char_lm(self):
        module = make_repository.load("char_lm")
        self.assertTrue(module.__doc__.startswith("char_lm:"))
        model = module.build()
        self.assertFalse(model.training)
        prompt, count = module.example_inputs()

        def text(p, n):
            with torch.inference_mode():
                pieces = [r["text_output"] for r in model(p, torch.tensor([n]))]
            for piece in pieces:  # one printable character per response
                self.assertEqual(len(piece), 1)
                self.assertEqual(len(piece[0]), 1)
                self.assertTrue(0x20 <= piece[0][0] <= 0x7E, piece)
            return b"".join(p[0] for p in pieces)

        self.assertEqual(len(text(prompt, int(count[0]))), int(count[0]))
        self.assertEqual(text([b"abc"], 20), text([b"abc"], 20))  # the prompt seeds the sampler
        self.assertEqual(len(text([b"abc"], 0)), module.DEFAULT_TOKENS)
        with self.assertRaisesRegex(ValueError, "max_tokens: 513 is not in 1..512"):
            text([b"abc"], 513)

    def test_llama_decoder(self):
        module = make_repository.load("llama_decoder")
        self.assertTrue(module.__doc__.startswith("llama_decoder:"))
        model = module.build()
        self.assertFalse(model.training)
        self.assertEqual(model.continuous_batching, 16)
        outputs = M.tensor_specs(module.SIGNATURE["outputs"], "outputs")
        args = module.example_inputs()
        with torch.inference_mode():
            responses = list(model(*args))
        self.assertEqual(len(responses), int(args[2][0]))
        for r in responses:
            for spec, value in zip(outputs, served_values(r, [o["name"] for o in outputs])):
                self.check_value(spec, value, None, f"llama_decoder output {spec['name']}")
        self.assertEqual([r["FINISH_REASON"][0] for r in responses], [b"", b"", b"", b"length"])
        chat = b'[{"role": "user", "content": "hello"}]'
        self.assertEqual(module._prompt([b"ignored"], [chat]), b"user: hello\nassistant: ")
        with self.assertRaisesRegex(ValueError, "MAX_TOKENS: 257 is more than 256"):
            model.start([b"x"], [b""], torch.tensor([257]), torch.tensor([1.0]), torch.tensor([1]))

    def test_two_io(self):
        _, args, result = self.check_model("two_io", None)
        self.assertTrue(torch.equal(result["SUM"], torch.tensor([11.0, 22.0, 33.0, 44.0])))
        self.assertTrue(torch.equal(result["PRODUCT"], torch.tensor([10.0, 40.0, 90.0, 160.0])))

    def test_numpy_model(self):
        self.check_model("numpy_model", 3)

    def test_fasterrcnn_mobilenet_v3_large_320_fpn(self):
        name = "fasterrcnn_mobilenet_v3_large_320_fpn"
        model, args, result = self.check_model(name, None)
        module = make_repository.load(name)
        counts = [len(result[0]["boxes"])]
        with torch.inference_mode():
            for more in module.more_example_inputs():
                counts.append(len(model(*more)[0]["boxes"]))
            blank = model(torch.zeros(1, 3, 1, 1))[0]
        self.assertGreater(len(set(counts)), 1, f"box counts should vary with the image: {counts}")
        n = len(blank["boxes"])  # the server's warm-up input (-1 dims as 1) runs too
        self.assertEqual([list(v.shape) for v in blank.values()], [[n, 4], [n], [n]])
        # Without a declared signature, export finds the varying dimensions itself.
        tmp = tempfile.mkdtemp(prefix="manypy-det-test-")
        try:
            manifest = P.export(model, os.path.join(tmp, "det.mpk"), example_inputs=args,
                                more_example_inputs=module.more_example_inputs())
            self.assertEqual(manifest["inputs"][0]["shape"], [1, 3, -1, -1])
            self.assertEqual(manifest["outputs"], M.tensor_specs(module.SIGNATURE["outputs"], "o"))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_deeplabv3_mobilenet_v3_large(self):
        name = "deeplabv3_mobilenet_v3_large"
        model, args, result = self.check_model(name, 2)
        self.assertEqual(list(result), ["out"])
        self.assertEqual(list(result["out"].shape), [2, 21, 128, 128])
        # The logits depend on the image (the random backbone is calibrated).
        self.assertGreater(len(set(result["out"].argmax(1).flatten().tolist())), 1)
        module = make_repository.load(name)
        with torch.inference_mode():
            (more,) = module.more_example_inputs()[0]
            self.assertEqual(list(model(more)["out"].shape), [1, 21, 96, 160])

    def test_wav2vec2_base(self):
        model, args, result = self.check_model("wav2vec2_base", 1)
        self.assertIsInstance(result, tuple)
        self.assertEqual(len(result), 2)
        self.assertIsNone(result[1])  # no lengths in, none out: export leaves it out

    def test_make_repository_small_models(self):
        tmp = tempfile.mkdtemp(prefix="manypy-repo-test-")
        try:
            names = ["text_classifier", "python_heavy", "two_io", "numpy_model"]
            cmd = ["/usr/bin/python3", os.path.join(MODELS_DIR, "make_repository.py"), "--out", tmp]
            for name in names:
                cmd += ["--only", name]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                  env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertEqual(len([l for l in proc.stdout.splitlines() if " MB " in l]), len(names))
            again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            self.assertEqual(again.stdout.count("up to date"), len(names), again.stdout + again.stderr)
            for name in names:
                path = os.path.join(tmp, f"{name}.mpk")
                manifest = P.check_archive(path)
                module = make_repository.load(name)
                self.assertEqual(manifest["name"], name)
                self.assertEqual(manifest["version"], 1)
                self.assertEqual(manifest["entry_point"]["kind"], "pickle")
                self.assertEqual(manifest["inputs"], M.tensor_specs(module.SIGNATURE["inputs"], "i"))
                self.assertEqual(manifest["outputs"], M.tensor_specs(module.SIGNATURE["outputs"], "o"))
                with zipfile.ZipFile(path) as zf:
                    self.assertIn(f"{name}/{name}.py", zf.namelist())  # the module is interned
                model, _ = P.load_model(path)
                args = module.example_inputs(2) if manifest["max_batch_size"] else module.example_inputs()
                with torch.inference_mode():
                    got, want = model(*args), module.build()(*args)
                if isinstance(want, dict):
                    for key in want:
                        self.assertTrue(torch.equal(got[key], want[key]), f"{name} {key}")
                else:
                    self.assertTrue(torch.equal(got, want), name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
