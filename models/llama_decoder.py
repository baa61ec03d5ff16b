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
request's inputs into its state (and takes a slot of the model's KV cache);
`step(states)` is one forward pass for every request, however long their
caches: the prompts of those that joined since the last step and the last
token of the others, packed one after another (no padding through the
linear layers; attention reads every request's cache with one indexed read
per block and masks what a query may not see), then one token sampled per
request, all rows at once, each from its own seeded sampler so a request's
text does not depend on its batch. `forward` is the same code for one
request as a generator, which is how it streams when continuous_batching is
0 (make bench-generate compares the two).

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
import random
import weakref

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, WIDTH, HEADS, KV_HEADS, BLOCKS, HIDDEN = 256, 128, 8, 2, 4, 384
HEAD_DIM = WIDTH // HEADS
MAX_PROMPT, MAX_TOKENS, DEFAULT_TOKENS = 512, 256, 16
CAPACITY = MAX_PROMPT + MAX_TOKENS  # positions a request's KV cache holds
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


class Dense(nn.Module):
    """A linear layer without bias whose weight is stored [in, out], as
    GPT-2's Conv1D: x @ weight is a plain (non-transposed) matrix product,
    which OpenBLAS computes without repacking the weight for the few rows of
    a decode step (nn.Linear's x @ weight.t() measured 1.3-2.4x slower at
    8-16 rows here). Initialized as nn.Linear."""

    def __init__(self, n_in, n_out):
        super().__init__()
        bound = 1 / math.sqrt(n_in)
        self.weight = nn.Parameter(torch.empty(n_in, n_out).uniform_(-bound, bound))

    def forward(self, x):
        return x @ self.weight


def rotary(x, turn):
    """Rotates pairs of x's last dimension by angles that grow with position
    (RoFormer, as Meta's Llama: the pairs are neighbours, rotated as complex
    numbers, one multiplication); x is [tokens, heads, head_dim], turn
    [tokens, 1, head_dim / 2] complex (the table's rows at each token's
    position). Returns x's shape, in a new tensor."""
    pairs = torch.view_as_complex(x.reshape(x.shape[0], x.shape[1], -1, 2))
    return torch.view_as_real(pairs * turn).flatten(2)


class Pass:
    """What one forward pass over a batch shares between its blocks: the new
    tokens packed one after another (request i's n_i tokens at rows
    offsets[i]..), each token's request, KV-cache slot and position, and the
    attention bias of every (query head, key head) pair: 0 where a query may
    see a key, -inf elsewhere (see Attention)."""

    def __init__(self, states, new, turn):
        lengths = [len(t) for t in new]
        self.batch, self.width = len(states), max(lengths)  # requests, longest new run
        self.decode = self.width == 1  # every request one token: no padding at all
        rows, cols, slot_of, position_of, first = [], [], [], [], []
        for i, (s, n) in enumerate(zip(states, lengths)):
            rows += [i] * n
            cols += range(n)
            slot_of += [s.slot] * n
            position_of += range(s.position, s.position + n)
            first.append(s.position)
        self.tokens = torch.tensor([t for run in new for t in run])
        positions = torch.tensor(position_of)
        self.slot_of = torch.tensor(slot_of)
        self.position_of = positions
        self.slots = torch.tensor([s.slot for s in states])
        self.keys = max(f + n for f, n in zip(first, lengths))  # cache length to read
        self.last = torch.tensor([o - 1 for o in _running_sum(lengths)])  # each request's last token
        self.rows, self.cols = torch.tensor(rows), torch.tensor(cols)
        self.turn = turn.index_select(0, positions)[:, None]
        # Query (request i, new token j, head h) sits at position first[i] + j
        # and sees the keys up to it (its request's cache and its own run,
        # causally) of its key/value head h // G only. Padded queries
        # (j >= n_i) see finite keys too and are dropped.
        query = torch.tensor(first)[:, None] + torch.arange(self.width)[None, :]
        seen = torch.arange(self.keys)[None, None, :] <= query[:, :, None]  # [batch, width, keys]
        own = torch.arange(HEADS)[:, None] // (HEADS // KV_HEADS) == torch.arange(KV_HEADS)[None, :]
        allowed = seen[:, :, None, :, None] & own[None, None, :, None, :]
        shape = (self.batch, self.width * HEADS, self.keys * KV_HEADS)
        self.bias = torch.zeros(shape).masked_fill_(~allowed.reshape(shape), float("-inf"))

    def pad(self, x):
        """[tokens, ...] -> [batch, width, ...] (padded with zeros)."""
        if self.decode:
            return x.unsqueeze(1)
        out = x.new_zeros((self.batch, self.width) + tuple(x.shape[1:]))
        out[self.rows, self.cols] = x
        return out

    def unpad(self, x):
        """[batch, width, ...] -> [tokens, ...]."""
        return x.squeeze(1) if self.decode else x[self.rows, self.cols]


def _running_sum(values):
    total, out = 0, []
    for v in values:
        total += v
        out.append(total)
    return out


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        # Queries, keys and values in one projection (as gpt-fast's wqkv).
        self.qkv = Dense(WIDTH, (HEADS + 2 * KV_HEADS) * HEAD_DIM)
        self.out = Dense(HEADS * HEAD_DIM, WIDTH)

    def forward(self, x, p, keys, values):
        """x [tokens, width] (packed, see Pass); keys and values: this block's
        cache, [slots, capacity, kv_heads, head_dim], extended here with the
        new tokens' keys and values at their slots and positions."""
        qkv = self.qkv(x).view(x.shape[0], HEADS + 2 * KV_HEADS, HEAD_DIM)
        qk = rotary(qkv[:, :HEADS + KV_HEADS], p.turn)  # queries and keys rotate alike
        q, k, v = qk[:, :HEADS], qk[:, HEADS:], qkv[:, HEADS + KV_HEADS:]
        keys.index_put_((p.slot_of, p.position_of), k)
        values.index_put_((p.slot_of, p.position_of), v)
        # Every request's cache up to the longest, one row per (position,
        # key/value head): [batch, keys * kv_heads, head_dim].
        k = keys[:, :p.keys].index_select(0, p.slots).view(p.batch, -1, HEAD_DIM)
        v = values[:, :p.keys].index_select(0, p.slots).view(p.batch, -1, HEAD_DIM)
        # Grouped-query attention as one matrix product per request: every
        # query head (rows: new token, head) against both key/value heads'
        # keys, the other group's masked by the bias (query heads
        # g*G..g*G+G-1 share key/value head g, G = HEADS // KV_HEADS). Twice
        # the products of a product per (request, key/value head), but half
        # the matrices: at these sizes each costs more to start than to
        # compute (16 requests decoding, one block: about 2/3 of the time).
        q = p.pad(q).reshape(p.batch, p.width * HEADS, HEAD_DIM)
        scores = torch.baddbmm(p.bias, q, k.transpose(1, 2), alpha=1 / math.sqrt(HEAD_DIM))
        y = torch.bmm(torch.softmax(scores, dim=-1), v)  # [batch, width * heads, head_dim]
        return self.out(p.unpad(y.view(p.batch, p.width, WIDTH)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = RMSNorm(WIDTH)
        self.attention = Attention()
        self.mlp_norm = RMSNorm(WIDTH)
        self.gate_up = Dense(WIDTH, 2 * HIDDEN)
        self.down = Dense(HIDDEN, WIDTH)

    def forward(self, x, p, keys, values):
        x = x + self.attention(self.attention_norm(x), p, keys, values)
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(gate) * up)


class KvCache:
    """The KV caches of one model object's requests: per block, keys and
    values of every slot, [blocks, slots, capacity, kv_heads, head_dim] each,
    so one step reads and writes every request's cache with one indexed
    operation per block. A request holds a slot from start until its state
    is released (finished, failed, cancelled: the server drops it). Grows by
    doubling when every slot is taken. Used by one thread at a time (the
    interpreter's)."""

    def __init__(self):
        self.keys = self.values = None
        self.free = []

    def __getstate__(self):  # packaged empty: the caches belong to a running model
        return {}

    def __setstate__(self, state):
        self.__init__()

    def take(self):
        if not self.free:
            slots = 0 if self.keys is None else self.keys.shape[1]
            grown = max(16, 2 * slots)
            with torch.inference_mode():
                shape = (BLOCKS, grown - slots, CAPACITY, KV_HEADS, HEAD_DIM)
                more = [torch.zeros(shape), torch.zeros(shape)]
                if self.keys is not None:
                    more = [torch.cat((self.keys, more[0]), 1), torch.cat((self.values, more[1]), 1)]
            self.keys, self.values = more
            self.free = list(range(grown - 1, slots - 1, -1))
        return self.free.pop()

    def give_back(self, slot):
        self.free.append(slot)


class Request:
    """One request's state: its prompt (until the step that prefills it),
    its KV-cache slot and position, its next logits, its sampler."""

    def __init__(self, ids, max_tokens, temperature, seed, cache):
        self.prompt = ids
        self.prompt_tokens = torch.tensor([len(ids)])
        self.slot = cache.take()
        weakref.finalize(self, cache.give_back, self.slot)
        self.position = 0
        self.left = max_tokens
        self.temperature = temperature
        self.sampler = random.Random(seed)  # one uniform draw per token


class LlamaDecoder(nn.Module):
    continuous_batching = 16  # requests one step advances (0: each request its own generator)

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, WIDTH)
        # Llama's (and GPT-2's) scale: with nn.Embedding's N(0, 1) the tied head
        # would see each token's own embedding through the residual and repeat
        # the last token forever; at 0.02 the blocks' output decides the text.
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = RMSNorm(WIDTH)
        mask = torch.full((VOCAB,), float("-inf"))
        mask[PRINTABLE[0]:PRINTABLE[1] + 1] = 0
        self.register_buffer("printable", mask)
        angle = torch.arange(CAPACITY, dtype=torch.float32)[:, None] * (
            10000.0 ** (-torch.arange(HEAD_DIM // 2, dtype=torch.float32) / (HEAD_DIM // 2)))
        self.register_buffer("turn", torch.polar(torch.ones_like(angle), angle), persistent=False)
        self.one = torch.tensor([1])  # every response's COMPLETION_TOKENS
        self.cache = KvCache()

    def _advance(self, states, new):
        """One forward pass: new[i] (token ids) continue states[i]; returns
        the logits after each request's last new token, [batch, vocab]."""
        with torch.inference_mode():
            p = Pass(states, new, self.turn)
            x = self.embed(p.tokens)
            for b, block in enumerate(self.blocks):
                x = block(x, p, self.cache.keys[b], self.cache.values[b])
            for s, run in zip(states, new):
                s.position += len(run)
            # The head is tied to the embedding.
            return self.norm(x.index_select(0, p.last)) @ self.embed.weight.t()

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
                       seed if seed >= 0 else _seed(ids), self.cache)

    def _sample(self, states, logits):
        """One token per state: greedy at temperature 0, else drawn from the
        softmax at its temperature by inverting its distribution at a uniform
        from the state's own sampler (so a request's text does not depend on
        its batch); all rows at once."""
        logits = logits + self.printable
        temperatures = torch.tensor([max(s.temperature, 1e-6) for s in states])
        cdf = torch.softmax(logits / temperatures[:, None], -1).cumsum(-1)
        uniform = torch.tensor([s.sampler.random() for s in states]) * cdf[:, -1]
        drawn = torch.searchsorted(cdf, uniform[:, None], right=True)[:, 0].clamp_(max=VOCAB - 1)
        greedy = torch.tensor([s.temperature <= 0 for s in states])
        return torch.where(greedy, logits.argmax(-1), drawn).tolist()

    def step(self, states):
        """Prefill and decode in one forward pass (ORCA's iteration-level
        batching, chunked-prefill style): the requests that joined since the
        last step bring their whole prompt, the others their last token; then
        one token is sampled for every request."""
        new = [s.prompt if s.prompt is not None else [s.token] for s in states]
        tokens = self._sample(states, self._advance(states, new))
        responses, finished = [], []
        for s, t in zip(states, tokens):
            s.prompt, s.token = None, t
            s.left -= 1
            done = s.left <= 0
            responses.append({"TEXT": [bytes([t])], "FINISH_REASON": [b"length" if done else b""],
                              "COMPLETION_TOKENS": self.one, "PROMPT_TOKENS": s.prompt_tokens})
            finished.append(done)
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
