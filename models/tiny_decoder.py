"""tiny_decoder: a small decoder-only transformer written as this year's code
is: torch.nn.RMSNorm, rotary position embeddings, causal
torch.nn.functional.scaled_dot_product_attention and a SwiGLU MLP, 2 blocks
of width 64 over a 256-token vocabulary, the output head tied to the
embedding. Random weights (torch.manual_seed(11)). Needs PyTorch >= 2.4
(nn.RMSNorm is 2.4's; SDPA 2.0's): make_repository.py skips it, saying
why, on Debian 12's 1.13.

Signature (up to 4 sequences of one length per call): INPUT_IDS INT64 [-1]
-> LOGITS FP32 [-1, 256].
"""
import torch
from torch import nn
from torch.nn import functional as F

REQUIRES_TORCH = (2, 4)
REQUIRES_WHY = "torch.nn.RMSNorm (2.4) and scaled_dot_product_attention (2.0)"

VOCAB, WIDTH, HEADS, BLOCKS = 256, 64, 4, 2

SIGNATURE = {
    "inputs": [{"name": "INPUT_IDS", "datatype": "INT64", "shape": [-1]}],
    "outputs": [{"name": "LOGITS", "datatype": "FP32", "shape": [-1, VOCAB]}],
    "max_batch_size": 4,
    "description": "decoder-only transformer: RMSNorm, rotary embeddings, causal SDPA, SwiGLU",
}


def rotary(x, positions):
    """Rotates pairs of x's last dimension by angles that grow with position
    (RoFormer's rotary embedding); x is [batch, heads, seq, head_dim]."""
    half = x.shape[-1] // 2
    freq = 10000.0 ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angle = positions[:, None].to(torch.float32) * freq[None, :]  # [seq, half]
    cos, sin = angle.cos(), angle.sin()
    a, b = x[..., :half], x[..., half:]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.out = nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, x):
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, HEADS, WIDTH // HEADS).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [batch, heads, seq, head_dim]
        positions = torch.arange(seq, device=x.device)
        q, k = rotary(q, positions), rotary(k, positions)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, seq, WIDTH))


class SwiGLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.up = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.down = nn.Linear(4 * WIDTH, WIDTH, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.RMSNorm(WIDTH)
        self.attention = Attention()
        self.mlp_norm = nn.RMSNorm(WIDTH)
        self.mlp = SwiGLU()

    def forward(self, x):
        x = x + self.attention(self.attention_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TinyDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, WIDTH)
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.norm = nn.RMSNorm(WIDTH)

    def forward(self, ids):
        x = self.embedding(ids)
        for block in self.blocks:
            x = block(x)
        return self.norm(x) @ self.embedding.weight.T  # [batch, seq, VOCAB]


def supported():
    """None when this torch can build the model, else why not."""
    have = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    if have >= REQUIRES_TORCH:
        return None
    return (f"needs PyTorch >= {REQUIRES_TORCH[0]}.{REQUIRES_TORCH[1]} for {REQUIRES_WHY}; "
            f"this is {torch.__version__}")


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    why = supported()
    if why:
        raise RuntimeError("tiny_decoder " + why)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        model = TinyDecoder()
    return model.eval()


def example_inputs(batch_size=1):
    """Positional inputs for one call: batch_size sequences of 12 token ids."""
    return (torch.arange(12 * batch_size).reshape(batch_size, 12) % VOCAB,)
