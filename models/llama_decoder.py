"""llama_decoder: a small Llama-style decoder that streams text with
continuous batching (docs/text-generation.md, "Continuous batching").

RMSNorm, rotary position embeddings, grouped-query attention (8 query heads
sharing 2 key/value heads), a SwiGLU MLP, 4 blocks of width 128 over a byte
vocabulary (256 ids; sampling keeps to printable ASCII so every piece is
UTF-8), a KV cache per request. Random weights (torch.manual_seed(11)),
made when it is packaged: nothing is downloaded. Written with PyTorch 1.13's
APIs (its own RMSNorm and attention; no scaled_dot_product_attention), so it
runs on Debian 12 and 13 alike.

Continuous batching: `continuous_batching = 16`, `start(...)` reads one
request's inputs into its state; `step(states)` prefills the prompts of the
requests that joined (one forward pass per prompt length), samples one token
for every running request and advances them all with one batched forward
pass (KV caches of different lengths padded and masked). `forward` is the same code
for one request as a generator, which is how it streams when
continuous_batching is 0 (make bench-generate compares the two).

Signature, named for the OpenAI routes' convention: PROMPT BYTES [1],
MESSAGES BYTES [1] (a chat's messages as a JSON array; anything else: a
completion of PROMPT),
MAX_TOKENS INT64 [1] (<= 0: 16; at most 256), TEMPERATURE FP32 [1] (0:
greedy), SEED INT64 [1] (< 0: from the prompt) -> TEXT BYTES [1] (one
character per response), FINISH_REASON BYTES [1] ("length" on the last
response, else empty), COMPLETION_TOKENS INT64 [1] (1 per response),
PROMPT_TOKENS INT64 [1] (the prompt's bytes, on every response).
"""
import json
import math

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, WIDTH, HEADS, KV_HEADS, BLOCKS, HIDDEN = 256, 128, 8, 2, 4, 384
HEAD_DIM = WIDTH // HEADS
MAX_PROMPT, MAX_TOKENS, DEFAULT_TOKENS = 512, 256, 16
PRINTABLE = (0x20, 0x7E)

SIGNATURE = {
    "inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1]},
               {"name": "MESSAGES", "datatype": "BYTES", "shape": [1]},
               {"name": "MAX_TOKENS", "datatype": "INT64", "shape": [1]},
               {"name": "TEMPERATURE", "datatype": "FP32", "shape": [1]},
               {"name": "SEED", "datatype": "INT64", "shape": [1]}],
    "outputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1]},
                {"name": "FINISH_REASON", "datatype": "BYTES", "shape": [1]},
                {"name": "COMPLETION_TOKENS", "datatype": "INT64", "shape": [1]},
                {"name": "PROMPT_TOKENS", "datatype": "INT64", "shape": [1]}],
    "description": "Llama-style decoder (RMSNorm, RoPE, GQA, KV cache), byte tokenizer, random "
                   "weights; continuous batching",
}

# The OpenAI routes' declaration (docs/text-generation.md); make_repository.py
# passes it where the packager takes `openai`.
OPENAI = {
    "routes": ["completions", "chat/completions"],
    "inputs": {"prompt": "PROMPT", "messages": "MESSAGES", "max_tokens": "MAX_TOKENS",
               "temperature": "TEMPERATURE", "seed": "SEED"},
    "outputs": {"text": "TEXT", "finish_reason": "FINISH_REASON",
                "completion_tokens": "COMPLETION_TOKENS", "prompt_tokens": "PROMPT_TOKENS"},
}


def _text(value):
    while isinstance(value, (list, tuple)):
        if len(value) != 1:
            raise ValueError(f"expected one text, got {len(value)}")
        value = value[0]
    return value.encode() if isinstance(value, str) else bytes(value)


def _prompt(prompt, messages):
    """The bytes to prefill: the prompt, or a chat's messages as "role: content" lines."""
    chat = _text(messages).strip()
    if not chat.startswith(b"["):  # a completion (the server's warm-up sends a zero byte)
        return _text(prompt)
    lines = []
    for m in json.loads(chat):
        content = m.get("content", "")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        lines.append(f"{m.get('role', 'user')}: {content}")
    return ("\n".join(lines) + "\nassistant: ").encode()


def _seed(ids):
    seed = 7
    for i in ids:
        seed = (seed * 131 + i + 1) % (2 ** 31)
    return seed


class RMSNorm(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary(x, positions):
    """Rotates pairs of x's last dimension by angles that grow with position
    (RoFormer); x is [batch, heads, seq, head_dim], positions [batch, seq]."""
    half = x.shape[-1] // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float32) / half)
    angle = positions[:, None, :, None].to(torch.float32) * freq  # [batch, 1, seq, half]
    cos, sin = angle.cos(), angle.sin()
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q = nn.Linear(WIDTH, HEADS * HEAD_DIM, bias=False)
        self.kv = nn.Linear(WIDTH, 2 * KV_HEADS * HEAD_DIM, bias=False)
        self.out = nn.Linear(HEADS * HEAD_DIM, WIDTH, bias=False)

    def forward(self, x, positions, caches):
        """x [batch, seq, width]; positions [batch, seq]; caches: per row a
        [2] list (keys, values), each [len, kv_heads, head_dim], extended here.
        Row i attends to its own cache and its new tokens (causally)."""
        batch, seq, _ = x.shape
        q = self.q(x).view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2)
        k, v = self.kv(x).view(batch, seq, 2, KV_HEADS, HEAD_DIM).unbind(2)
        q = rotary(q, positions)
        k = rotary(k.transpose(1, 2), positions).transpose(1, 2)
        for i, cache in enumerate(caches):
            cache[0] = torch.cat((cache[0], k[i]))
            cache[1] = torch.cat((cache[1], v[i]))
        lengths = torch.tensor([c[0].shape[0] for c in caches])
        keys = nn.utils.rnn.pad_sequence([c[0] for c in caches], batch_first=True)
        values = nn.utils.rnn.pad_sequence([c[1] for c in caches], batch_first=True)
        # Grouped-query attention: each key/value head serves HEADS // KV_HEADS query heads.
        keys = keys.transpose(1, 2).repeat_interleave(HEADS // KV_HEADS, dim=1)
        values = values.transpose(1, 2).repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = q @ keys.transpose(-1, -2) / math.sqrt(HEAD_DIM)  # [batch, heads, seq, len]
        slot = torch.arange(keys.shape[2])
        # A key is seen when it is in the row's cache and not after the query's position.
        seen = (slot[None, None, :] < lengths[:, None, None]) & (
            slot[None, None, :] <= (lengths[:, None, None] - seq + torch.arange(seq)[None, :, None]))
        scores = scores.masked_fill(~seen[:, None], float("-inf"))
        y = torch.softmax(scores, dim=-1) @ values
        return self.out(y.transpose(1, 2).reshape(batch, seq, WIDTH))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(WIDTH)
        self.attention = Attention()
        self.mlp_norm = RMSNorm(WIDTH)
        self.gate_up = nn.Linear(WIDTH, 2 * HIDDEN, bias=False)
        self.down = nn.Linear(HIDDEN, WIDTH, bias=False)

    def forward(self, x, positions, caches):
        x = x + self.attention(self.attention_norm(x), positions, caches)
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class Request:
    """One request's state: its KV cache per block, its next logits, its sampler."""

    def __init__(self, ids, max_tokens, temperature, seed):
        self.prompt = ids  # until the step that prefills it
        self.prompt_tokens = len(ids)
        self.caches = [[torch.zeros(0, KV_HEADS, HEAD_DIM), torch.zeros(0, KV_HEADS, HEAD_DIM)]
                       for _ in range(BLOCKS)]
        self.position = 0
        self.logits = None
        self.left = max_tokens
        self.temperature = temperature
        self.sampler = torch.Generator().manual_seed(seed)


class LlamaDecoder(nn.Module):
    continuous_batching = 16  # requests one step advances (0: each request its own generator)

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = RMSNorm(WIDTH)
        mask = torch.full((VOCAB,), float("-inf"))
        mask[PRINTABLE[0]:PRINTABLE[1] + 1] = 0
        self.register_buffer("printable", mask)

    def _advance(self, tokens, states):
        """Runs tokens [batch, seq] (row i continues states[i]) through the
        model; each state's logits become those after its last token."""
        seq = tokens.shape[1]
        positions = torch.tensor([[s.position + j for j in range(seq)] for s in states])
        x = self.embed(tokens)
        for b, block in enumerate(self.blocks):
            x = block(x, positions, [s.caches[b] for s in states])
        logits = self.norm(x[:, -1]) @ self.embed.weight.t()  # the head is tied to the embedding
        for i, s in enumerate(states):
            s.position += seq
            s.logits = logits[i]

    def start(self, prompt, messages, max_tokens, temperature, seed):
        ids = list(_prompt(prompt, messages)) or [ord(" ")]
        if len(ids) > MAX_PROMPT:
            raise ValueError(f"the prompt is {len(ids)} bytes; at most {MAX_PROMPT}")
        count = int(max_tokens.reshape(-1)[0])
        count = DEFAULT_TOKENS if count <= 0 else count
        if count > MAX_TOKENS:
            raise ValueError(f"MAX_TOKENS: {count} is more than {MAX_TOKENS}")
        seed = int(seed.reshape(-1)[0])
        return Request(ids, count, float(temperature.reshape(-1)[0]),
                       seed if seed >= 0 else _seed(ids))

    def _prefill(self, states):
        """The prompts of the states that joined since the last step, in one
        forward pass per prompt length (prefill and decode in one iteration,
        as ORCA does): many requests joining at once cost about one."""
        by_length = {}
        for s in states:
            if s.prompt is not None:
                by_length.setdefault(len(s.prompt), []).append(s)
        for group in by_length.values():
            self._advance(torch.tensor([s.prompt for s in group]), group)
            for s in group:
                s.prompt = None

    def _sample(self, states):
        """One token per state: greedy at temperature 0, else drawn with the
        state's own generator (so a request's text does not depend on its batch)."""
        temperatures = torch.tensor([max(s.temperature, 1e-6) for s in states])
        logits = torch.stack([s.logits for s in states]) + self.printable
        probs = torch.softmax(logits / temperatures[:, None], -1)
        return [int(logits[i].argmax()) if s.temperature <= 0
                else int(torch.multinomial(probs[i], 1, generator=s.sampler))
                for i, s in enumerate(states)]

    def step(self, states):
        self._prefill(states)
        tokens = self._sample(states)
        responses, finished = [], []
        for s, t in zip(states, tokens):
            s.left -= 1
            done = s.left <= 0
            responses.append({"TEXT": [bytes([t])], "FINISH_REASON": [b"length" if done else b""],
                              "COMPLETION_TOKENS": torch.tensor([1]),
                              "PROMPT_TOKENS": torch.tensor([s.prompt_tokens])})
            finished.append(done)
        going = [i for i, done in enumerate(finished) if not done]
        if going:
            self._advance(torch.tensor([[tokens[i]] for i in going]), [states[i] for i in going])
        return responses, finished

    def forward(self, prompt, messages, max_tokens, temperature, seed):
        state = self.start(prompt, messages, max_tokens, temperature, seed)
        while True:
            responses, finished = self.step([state])
            yield responses[0]
            if finished[0]:
                return


def build():
    torch.manual_seed(11)
    return LlamaDecoder().eval()


def example_inputs():
    return ([b"Once upon a time"], [b""], torch.tensor([4]), torch.tensor([0.8]),
            torch.tensor([-1]))
