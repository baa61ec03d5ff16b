"""Models declared for the OpenAI routes (docs/text-generation.md), for
tests/server/openai/ (test_openai_http.py, test_openai_client.py), packaged
into openai/ by make_server_test_models.py.

byte_writer (completions and chat/completions, every request field mapped):
a deterministic character-level "generator". Its source text is the prompt
(completions) or the content of the last message (chat); it yields that
text one character a response, over and over, until max_tokens characters
(finish_reason "length"), or once through when max_tokens is -1 (finish
"stop"); it stops before the character that would complete a stop string
(finish "stop"; the tests use one-character stop strings). Each
response counts one completion token; the prompt counts one token per
character of the source. Two sources are special:
  "params?"      -> one response, "t=<temperature> p=<top_p> s=<seed>
                    stop=<stop strings joined by |> n=<max_tokens>", so a test
                    sees what reached the model;
  "fail!"        -> "f", then raises ValueError("asked to fail"): an error
                    after the stream started;
  "slow:<path>"  -> "x" every 50 ms for ever (up to max_tokens), appending
                    "closed" to <path> when the generator is closed early.

one_shot (completions): not a generator; returns the prompt upper-cased
as one response, with no finish reason or token counts mapped.

embedder (embeddings): INPUT BYTES [-1] -> EMBEDDING FP32 [-1, 8], the
histogram of each string's bytes modulo 8, and PROMPT_TOKENS (bytes in all).
"""
import json
import time

import torch
from torch import nn


def _text(value):
    while isinstance(value, (list, tuple)):
        value = value[0] if value else b""
    return bytes(value).decode()


def _source(prompt, messages):
    prompt = _text(prompt)
    chat = _text(messages)
    if chat.startswith("["):  # the server's warm-up sends zeros, not JSON
        content = json.loads(chat)[-1].get("content", "")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        return content
    return prompt


def _response(text, finish="", prompt_tokens=0):
    return {"TEXT": [text.encode()], "FINISH_REASON": [finish.encode()],
            "COMPLETION_TOKENS": torch.tensor([1 if text else 0]),
            "PROMPT_TOKENS": torch.tensor([prompt_tokens])}


class ByteWriter(nn.Module):
    def forward(self, prompt, messages, max_tokens, temperature, top_p, stop, seed):
        source = _source(prompt, messages)
        limit = int(max_tokens.reshape(-1)[0])
        stops = [bytes(s).decode() for s in stop]
        n_prompt = len(source)
        if source == "params?":
            yield _response(f"t={float(temperature[0]):.2f} p={float(top_p[0]):.2f} "
                            f"s={int(seed[0])} stop={'|'.join(stops)} n={limit}", "stop", n_prompt)
            return
        if source == "fail!":
            yield _response("f", "", n_prompt)
            raise ValueError("asked to fail")
        if source.startswith("slow:"):
            path = source[len("slow:"):]
            try:
                for i in range(limit if limit >= 0 else 10 ** 9):
                    if i:
                        time.sleep(0.05)
                    yield _response("x", "", n_prompt)
            except GeneratorExit:
                with open(path, "a") as f:
                    f.write("closed\n")
                raise
            yield _response("", "length", n_prompt)
            return
        if not source:
            yield _response("", "stop", n_prompt)
            return
        written = ""
        i = 0
        while limit < 0 and i < len(source) or limit >= 0 and i < limit:
            ch = source[i % len(source)]
            if any((written + ch).endswith(s) for s in stops if s):
                yield _response("", "stop", n_prompt)
                return
            written += ch
            i += 1
            yield _response(ch, "", n_prompt)
        yield _response("", "length" if limit >= 0 else "stop", n_prompt)


class OneShot(nn.Module):
    def forward(self, prompt):
        return [_text(prompt).upper().encode()]


class Embedder(nn.Module):
    def forward(self, strings):
        rows = []
        total = 0
        for s in strings:
            s = bytes(s)
            total += len(s)
            counts = [0.0] * 8
            for b in s:
                counts[b % 8] += 1.0
            rows.append(counts)
        return {"EMBEDDING": torch.tensor(rows, dtype=torch.float32).reshape(len(rows), 8),
                "PROMPT_TOKENS": torch.tensor([total])}
