"""The OpenAI-compatible routes (docs/text-generation.md) over plain HTTP
(urllib), against the real server: what any client sees, on every release
(Debian 12 has no `openai` package; test_openai_client.py uses it on 13)."""
import base64
import http.client
import json
import os
import struct
import unittest
import urllib.error
import urllib.request

import openai_server


class Http:
    def __init__(self, address, token=None):
        self.base = f"http://{address}"
        self.token = token

    def call(self, method, path, body=None):
        """(status, parsed JSON body)."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        request = urllib.request.Request(self.base + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stream(self, path, body):
        """The events' data of a streamed answer, "[DONE]" included, as text."""
        request = urllib.request.Request(self.base + path, data=json.dumps(body).encode(),
                                         method="POST")
        with urllib.request.urlopen(request, timeout=30) as r:
            self.last_content_type = r.headers["Content-Type"]
            text = r.read().decode()
        return [event[len("data: "):] for event in text.split("\n\n") if event]


def chunks(events):
    """The JSON chunks of a stream that ended with [DONE]."""
    assert events[-1] == "[DONE]", events
    return [json.loads(e) for e in events[:-1]]


class OpenAiHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = openai_server.start()
        cls.http = Http(cls.server.http_address)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop_expecting_clean_exit()

    def assertError(self, got, status, param=None, code=None, says=""):
        self.assertEqual(got[0], status, got)
        error = got[1]["error"]
        self.assertEqual(set(error), {"message", "type", "param", "code"})
        self.assertEqual(error["param"], param, error)
        self.assertEqual(error["code"], code, error)
        self.assertIn(says, error["message"])
        self.assertEqual(error["type"], "invalid_request_error" if status < 500 else "server_error")

    def test_lists_the_declared_models(self):
        status, body = self.http.call("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(body["object"], "list")
        self.assertEqual([m["id"] for m in body["data"]], ["byte_writer", "embedder", "one_shot"])
        self.assertEqual(body["data"][0]["object"], "model")
        self.assertEqual(self.http.call("GET", "/v1/models/embedder")[1]["id"], "embedder")
        self.assertError(self.http.call("GET", "/v1/models/nope"), 404, "model", "model_not_found")

    def test_completion(self):
        status, body = self.http.call("POST", "/v1/completions",
                                      {"model": "byte_writer", "prompt": "abc", "max_tokens": 5})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "text_completion")
        self.assertEqual(body["choices"][0]["text"], "abcab")
        self.assertEqual(body["choices"][0]["finish_reason"], "length")
        self.assertEqual(body["usage"], {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8})

    def test_completion_streamed_with_usage(self):
        events = self.http.stream("/v1/completions", {
            "model": "byte_writer", "prompt": "abc", "stream": True,
            "stream_options": {"include_usage": True}})
        self.assertEqual(self.http.last_content_type, "text/event-stream")
        got = chunks(events)
        self.assertEqual("".join(c["choices"][0]["text"] for c in got[:-1]), "abc")
        self.assertEqual([c["choices"][0]["finish_reason"] for c in got[:-1]], [None] * 3 + ["stop"])
        self.assertTrue(all(c["usage"] is None for c in got[:-1]))
        self.assertEqual(got[-1]["choices"], [])
        self.assertEqual(got[-1]["usage"], {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6})
        self.assertEqual(len({c["id"] for c in got}), 1)

    def test_chat(self):
        status, body = self.http.call("POST", "/v1/chat/completions", {
            "model": "byte_writer", "messages": [{"role": "system", "content": "be brief"},
                                                 {"role": "user", "content": "hey"}]})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "chat.completion")
        self.assertEqual(body["choices"][0]["message"], {"role": "assistant", "content": "hey"})
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")
        self.assertEqual(body["usage"]["completion_tokens"], 3)

    def test_chat_streamed(self):
        got = chunks(self.http.stream("/v1/chat/completions", {
            "model": "byte_writer", "stream": True, "max_tokens": 4,
            "messages": [{"role": "user", "content": "xy"}]}))
        self.assertEqual({c["object"] for c in got}, {"chat.completion.chunk"})
        self.assertEqual(got[0]["choices"][0]["delta"]["role"], "assistant")
        self.assertEqual("".join(c["choices"][0]["delta"].get("content", "") for c in got), "xyxy")
        self.assertEqual(got[-1]["choices"][0]["finish_reason"], "length")
        self.assertNotIn("usage", got[0])

    def test_parameters_reach_the_model(self):
        _, body = self.http.call("POST", "/v1/completions", {
            "model": "byte_writer", "prompt": "params?", "temperature": 0.5, "top_p": 0.25,
            "seed": 7, "stop": ["q", "r"], "n": 1, "user": "u"})
        self.assertEqual(body["choices"][0]["text"], "t=0.50 p=0.25 s=7 stop=q|r n=-1")
        _, body = self.http.call("POST", "/v1/chat/completions", {
            "model": "byte_writer", "messages": [{"role": "user", "content": "params?"}],
            "max_completion_tokens": 9, "stop": "z"})
        self.assertEqual(body["choices"][0]["message"]["content"], "t=1.00 p=1.00 s=-1 stop=z n=9")

    def test_stop(self):
        _, body = self.http.call("POST", "/v1/completions",
                                 {"model": "byte_writer", "prompt": "hello world", "stop": " "})
        self.assertEqual(body["choices"][0]["text"], "hello")
        self.assertEqual(body["choices"][0]["finish_reason"], "stop")

    def test_a_model_that_does_not_stream(self):
        _, body = self.http.call("POST", "/v1/completions", {"model": "one_shot", "prompt": "abc"})
        self.assertEqual(body["choices"][0]["text"], "ABC")
        self.assertEqual(body["usage"]["completion_tokens"], 1)
        got = chunks(self.http.stream("/v1/completions",
                                      {"model": "one_shot", "prompt": "abc", "stream": True}))
        self.assertEqual([c["choices"][0]["text"] for c in got], ["ABC", ""])

    def test_embeddings(self):
        status, body = self.http.call("POST", "/v1/embeddings",
                                      {"model": "embedder", "input": ["a", "bc!"]})
        self.assertEqual(status, 200, body)
        self.assertEqual([d["index"] for d in body["data"]], [0, 1])
        self.assertEqual(body["data"][1]["embedding"], openai_server.histogram("bc!"))
        self.assertEqual(body["usage"], {"prompt_tokens": 4, "total_tokens": 4})
        _, body = self.http.call("POST", "/v1/embeddings", {
            "model": "embedder", "input": "hello", "encoding_format": "base64", "dimensions": 8})
        packed = base64.b64decode(body["data"][0]["embedding"])
        self.assertEqual(list(struct.unpack("<8f", packed)), openai_server.histogram("hello"))

    def test_refusals_name_the_parameter(self):
        post = lambda path, body: self.http.call("POST", path, body)  # noqa: E731
        self.assertError(post("/v1/completions", {"model": "byte_writer", "prompt": "a", "n": 2}),
                         400, "n", None, "only 1")
        self.assertError(post("/v1/completions", {"model": "byte_writer", "prompt": "a", "tempreature": 1}),
                         400, "tempreature", None, "unknown parameter")
        self.assertError(post("/v1/completions", {"model": "byte_writer", "prompt": "a", "max_tokens": -3}),
                         400, "max_tokens")
        self.assertError(post("/v1/completions", {"model": "byte_writer", "prompt": "a", "temperature": 9}),
                         400, "temperature")
        self.assertError(post("/v1/completions", {"model": "byte_writer"}), 400, "prompt")
        self.assertError(post("/v1/completions", {"model": "byte_writer", "prompt": [1, 2]}), 400, "prompt")
        self.assertError(post("/v1/completions", {"model": "byte_writer", "prompt": "a",
                                                  "stream_options": {"include_usage": True}}),
                         400, "stream_options")
        self.assertError(post("/v1/chat/completions", {"model": "byte_writer", "messages": []}),
                         400, "messages")
        self.assertError(post("/v1/chat/completions", {"model": "byte_writer",
                                                       "messages": [{"role": "user", "content": "a"}],
                                                       "tools": [{"type": "function"}]}),
                         400, "tools")
        self.assertError(post("/v1/completions", {"model": "one_shot", "prompt": "a", "temperature": 0}),
                         400, "temperature", None, "does not take 'temperature'")
        self.assertError(post("/v1/embeddings", {"model": "embedder", "input": "a", "dimensions": 3}),
                         400, "dimensions")
        self.assertError(self.http.call("POST", "/v1/completions", b"{not json"), 400, None)
        self.assertError(post("/v1/completions", {"prompt": "a"}), 400, "model")

    def test_a_model_error_after_the_stream_started(self):
        events = self.http.stream("/v1/completions",
                                  {"model": "byte_writer", "prompt": "fail!", "stream": True})
        self.assertEqual(json.loads(events[0])["choices"][0]["text"], "f")
        error = json.loads(events[-1])["error"]  # the last event; no [DONE]
        self.assertEqual(len(events), 2, events)
        self.assertEqual(error["type"], "server_error")
        self.assertIn("asked to fail", error["message"])
        got = self.http.call("POST", "/v1/completions", {"model": "byte_writer", "prompt": "fail!"})
        self.assertError(got, 500, None, None, "asked to fail")

    def test_unknown_model_and_undeclared_route(self):
        self.assertError(self.http.call("POST", "/v1/completions", {"model": "nope", "prompt": "a"}),
                         404, "model", "model_not_found", "nope")
        got = self.http.call("POST", "/v1/chat/completions",
                             {"model": "embedder", "messages": [{"role": "user", "content": "a"}]})
        self.assertError(got, 400, "model", "model_not_supported",
                         "model 'embedder' does not serve /v1/chat/completions")
        self.assertError(self.http.call("GET", "/v1/nothing"), 404, None)

    def test_a_stream_closed_early_closes_the_generator(self):
        marker = openai_server.marker_path()
        try:
            host, port = self.server.http_address.split(":")
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            conn.request("POST", "/v1/completions", json.dumps({
                "model": "byte_writer", "prompt": f"slow:{marker}", "stream": True}),
                {"Content-Type": "application/json"})
            response = conn.getresponse()
            self.assertEqual(response.status, 200)
            self.assertTrue(response.readline().startswith(b"data: {"))
            response.close()  # the client leaves mid-stream
            conn.close()
            self.assertTrue(openai_server.wait_closed(marker), "the generator was not closed")
        finally:
            os.unlink(marker)
        # The server goes on serving.
        self.assertEqual(self.http.call("POST", "/v1/completions",
                                        {"model": "one_shot", "prompt": "x"})[0], 200)


class OpenAiTokenTest(unittest.TestCase):
    def test_bearer_tokens(self):
        path = openai_server.token_file("s3cret")
        server = openai_server.start((f"--auth-token-file={path}",))
        try:
            got = Http(server.http_address).call("GET", "/v1/models")
            self.assertEqual(got[0], 401, got)
            self.assertEqual(got[1]["error"]["type"], "authentication_error")
            self.assertEqual(got[1]["error"]["code"], "invalid_api_key")
            self.assertEqual(Http(server.http_address, "wrong").call("GET", "/v1/models")[0], 401)
            got = Http(server.http_address, "s3cret").call(
                "POST", "/v1/completions", {"model": "one_shot", "prompt": "ok"})
            self.assertEqual(got, (200, got[1]))
            self.assertEqual(got[1]["choices"][0]["text"], "OK")
        finally:
            server.stop_expecting_clean_exit()
            os.unlink(path)


if __name__ == "__main__":
    unittest.main()
