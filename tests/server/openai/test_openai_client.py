"""The OpenAI-compatible routes (docs/text-generation.md) through the
official `openai` Python client (Debian 13's python3-openai), against the
real server. Skipped where the package is missing (Debian 12:
test_openai_http.py covers the same routes there with plain HTTP)."""
import os
import unittest

import openai_server

try:
    import openai
except ImportError:  # Debian 12 ships no python3-openai
    openai = None


@unittest.skipIf(openai is None, "the openai package is not installed (Debian 13's python3-openai)")
class OpenAiClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = openai_server.start()
        cls.client = openai.OpenAI(base_url=f"http://{cls.server.http_address}/v1",
                                   api_key="unused", max_retries=0, timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.server.stop_expecting_clean_exit()

    def test_list(self):
        self.assertEqual([m.id for m in self.client.models.list()],
                         ["byte_writer", "embedder", "one_shot"])
        self.assertEqual(self.client.models.retrieve("embedder").owned_by, "manypy")

    def test_completion(self):
        c = self.client.completions.create(model="byte_writer", prompt="abc", max_tokens=5,
                                           temperature=0.2, seed=3)
        self.assertEqual(c.choices[0].text, "abcab")
        self.assertEqual(c.choices[0].finish_reason, "length")
        self.assertEqual((c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens),
                         (3, 5, 8))

    def test_completion_streamed(self):
        stream = self.client.completions.create(model="byte_writer", prompt="hello world",
                                                stop=[" "], stream=True)
        got = list(stream)
        self.assertEqual("".join(c.choices[0].text for c in got), "hello")
        self.assertEqual(got[-1].choices[0].finish_reason, "stop")

    def test_chat(self):
        c = self.client.chat.completions.create(
            model="byte_writer", messages=[{"role": "user", "content": "params?"}],
            temperature=0.5, top_p=0.75, seed=11, max_tokens=20, stop="q")
        self.assertEqual(c.choices[0].message.role, "assistant")
        self.assertEqual(c.choices[0].message.content, "t=0.50 p=0.75 s=11 stop=q n=20")

    def test_chat_streamed_with_usage(self):
        stream = self.client.chat.completions.create(
            model="byte_writer", messages=[{"role": "user", "content": "hey"}], stream=True,
            stream_options={"include_usage": True})
        got = list(stream)
        self.assertEqual(got[0].choices[0].delta.role, "assistant")
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in got if c.choices), "hey")
        self.assertEqual(got[-1].choices, [])
        self.assertEqual(got[-1].usage.completion_tokens, 3)
        self.assertEqual(got[-1].usage.prompt_tokens, 3)

    def test_embeddings(self):
        # The client asks for base64 unless told otherwise, and decodes it.
        e = self.client.embeddings.create(model="embedder", input=["a", "bc!"])
        self.assertEqual([d.embedding for d in e.data],
                         [openai_server.histogram("a"), openai_server.histogram("bc!")])
        self.assertEqual(e.usage.prompt_tokens, 4)
        e = self.client.embeddings.create(model="embedder", input="xyz", encoding_format="float")
        self.assertEqual(e.data[0].embedding, openai_server.histogram("xyz"))

    def test_unknown_model(self):
        with self.assertRaises(openai.NotFoundError) as raised:
            self.client.completions.create(model="nope", prompt="a")
        self.assertEqual(raised.exception.code, "model_not_found")

    def test_bad_parameter(self):
        with self.assertRaises(openai.BadRequestError) as raised:
            self.client.completions.create(model="byte_writer", prompt="a", n=2)
        self.assertEqual(raised.exception.param, "n")
        with self.assertRaises(openai.BadRequestError) as raised:
            self.client.chat.completions.create(
                model="embedder", messages=[{"role": "user", "content": "a"}])
        self.assertEqual(raised.exception.code, "model_not_supported")

    def test_a_stream_closed_early_closes_the_generator(self):
        marker = openai_server.marker_path()
        try:
            stream = self.client.chat.completions.create(
                model="byte_writer", messages=[{"role": "user", "content": f"slow:{marker}"}],
                stream=True)
            for i, _ in enumerate(stream):
                if i == 2:
                    break
            stream.close()
            self.assertTrue(openai_server.wait_closed(marker), "the generator was not closed")
        finally:
            os.unlink(marker)

    def test_bearer_token(self):
        path = openai_server.token_file("s3cret")
        server = openai_server.start((f"--auth-token-file={path}",))
        try:
            base = f"http://{server.http_address}/v1"
            with openai.OpenAI(base_url=base, api_key="s3cret", max_retries=0) as good:
                self.assertEqual(len(good.models.list().data), 3)
            with openai.OpenAI(base_url=base, api_key="wrong", max_retries=0) as bad:
                with self.assertRaises(openai.AuthenticationError):
                    bad.models.list()
        finally:
            server.stop_expecting_clean_exit()
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
