"""manypy_model_runtime.batched: continuous batching's start/step as the
server calls them (the opt-in's checks, a step's answers, exceptions that
name states), and models/llama_decoder: its batched steps give each request
the text it gets alone."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path[:0] = [os.path.join(REPO, "package_format", "python"), os.path.join(REPO, "models")]

import torch  # noqa: E402

from manypy_model_runtime import batched  # noqa: E402
from manypy_model_runtime.errors import ModelOutputError  # noqa: E402


class Named(Exception):
    def __init__(self, states):
        super().__init__("these broke")
        self.states = states


class Counter(torch.nn.Module):
    continuous_batching = 4

    def start(self, count):
        return {"left": int(count[0]), "sent": 0}

    def step(self, states):
        broken = [s for s in states if s["left"] < 0]
        if broken:
            raise Named(broken)
        if any(s["left"] == 99 for s in states):
            raise RuntimeError("no one named")
        out = []
        for s in states:
            out.append(torch.tensor([s["sent"]]))
            s["sent"] += 1
        return out, [s["sent"] >= s["left"] for s in states]


class BatchTest(unittest.TestCase):
    def batch(self, model=None):
        return batched.start_batch(model or Counter(), "forward", ["OUT"], "cpu", False)

    def test_the_opt_in_is_an_int_with_start_and_step(self):
        self.assertEqual(batched.batch_size(Counter()), 4)
        self.assertEqual(batched.batch_size(torch.nn.Linear(1, 1)), 0)
        bad = Counter()
        bad.continuous_batching = "16"
        with self.assertRaisesRegex(ValueError, "must be an int >= 0"):
            batched.batch_size(bad)

        class NoStep(torch.nn.Module):
            continuous_batching = 2

            def start(self, x):
                return x
        with self.assertRaisesRegex(ValueError, r"has no step\(\) method"):
            batched.batch_size(NoStep())

    def test_each_key_gets_its_response_and_finished_flag_in_order(self):
        b = self.batch()
        b.start(1, [torch.tensor([1])])
        b.start(2, [torch.tensor([3])])
        first = b.step([1, 2])
        self.assertEqual([int(x[0][0][0]) for x in first], [0, 0])
        self.assertEqual([x[1] for x in first], [True, False])
        b.drop([1])
        self.assertEqual([int(x[0][0][0]) for x in b.step([2])], [1])

    def test_an_exception_naming_states_fails_only_those(self):
        b = self.batch()
        b.start(1, [torch.tensor([5])])
        b.start(2, [torch.tensor([-1])])
        out = b.step([1, 2])
        self.assertIsNone(out[0][2])
        self.assertIsNone(out[0][0])  # no response from the failed step
        self.assertIn("Named: these broke", out[1][2])

    def test_an_exception_naming_no_state_fails_the_step(self):
        b = self.batch()
        b.start(1, [torch.tensor([99])])
        with self.assertRaisesRegex(RuntimeError, "no one named"):
            b.step([1])

    def test_a_step_with_the_wrong_number_of_answers_is_refused_naming_the_counts(self):
        class Short(Counter):
            def step(self, states):
                return [], []
        b = self.batch(Short())
        b.start(1, [torch.tensor([1])])
        with self.assertRaisesRegex(ModelOutputError, "given 1 states but returned 0"):
            b.step([1])


class LlamaDecoderTest(unittest.TestCase):
    def test_batched_steps_give_each_request_the_text_it_gets_alone(self):
        import llama_decoder as L
        model = L.build()

        def inputs(prompt, seed):
            return ([prompt], [b""], torch.tensor([12]), torch.tensor([0.8]), torch.tensor([seed]))
        prompts = [(b"Once upon a time", 1), (b"hi", 2), (b"The quick brown fox", 3)]
        with torch.inference_mode():
            alone = [b"".join(r["TEXT"][0] for r in model(*inputs(p, s))) for p, s in prompts]
            states = [model.start(*inputs(p, s)) for p, s in prompts]
            texts, live = [b""] * len(prompts), list(range(len(prompts)))
            while live:
                responses, finished = model.step([states[i] for i in live])
                for i, r in zip(live, responses):
                    texts[i] += r["TEXT"][0]
                live = [i for i, f in zip(live, finished) if not f]
        self.assertEqual(texts, alone)
        self.assertTrue(all(len(t) == 12 and t.isascii() for t in texts))

    def test_greedy_requests_joining_mid_batch_get_the_text_they_get_alone(self):
        """Temperature 0 (greedy), prompts of different lengths joining at
        different steps: a joiner's prompt is prefilled in the same forward
        pass as the others' next token, and every text equals its own alone;
        each request's KV-cache slot is free again once its state is gone."""
        import gc
        import llama_decoder as L
        model = L.build()

        def inputs(prompt, tokens):
            return ([prompt], [b""], torch.tensor([tokens]), torch.tensor([0.0]), torch.tensor([5]))
        # (prompt, tokens, the step it joins at)
        plan = [(b"Once upon a time", 10, 0), (b"hi", 6, 0), (b"The quick brown fox", 9, 3),
                (b"x", 4, 3), (b"a longer prompt that joins late", 5, 7)]
        with torch.inference_mode():
            alone = [b"".join(r["TEXT"][0] for r in model(*inputs(p, n))) for p, n, _ in plan]
            states, texts, live, at = {}, [b""] * len(plan), [], 0
            while at == 0 or live:
                for i, (p, n, join) in enumerate(plan):
                    if join == at:
                        states[i] = model.start(*inputs(p, n))
                        live.append(i)
                responses, finished = model.step([states[i] for i in live])
                for i, r in zip(live, responses):
                    texts[i] += r["TEXT"][0]
                live = [i for i, f in zip(live, finished) if not f]
                at += 1
        self.assertEqual(texts, alone)
        self.assertEqual([len(t) for t in texts], [n for _, n, _ in plan])
        states.clear()
        gc.collect()
        cache = model.cache
        self.assertEqual(sorted(cache.free), list(range(cache.keys.shape[1])))


if __name__ == "__main__":
    unittest.main()
