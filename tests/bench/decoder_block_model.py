"""decoder_block: one transformer decoder block as current models write it,
for make bench-compile: RMSNorm, causal scaled_dot_product_attention over 4
heads and a SwiGLU MLP, width 128, on a sequence of 16 positions (input
[1, 16, 128] FP32: hidden states, batch 1). Random weights from
torch.manual_seed(3). Needs PyTorch >= 2.4 (torch.nn.RMSNorm)."""
import torch
from torch import nn
from torch.nn import functional as F

WIDTH, HEADS, SEQUENCE = 128, 4, 16


class DecoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention_norm = nn.RMSNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.out = nn.Linear(WIDTH, WIDTH, bias=False)
        self.mlp_norm = nn.RMSNorm(WIDTH)
        self.gate = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.up = nn.Linear(WIDTH, 4 * WIDTH, bias=False)
        self.down = nn.Linear(4 * WIDTH, WIDTH, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.attention_norm(x)).split(WIDTH, dim=-1)
        heads = lambda t: t.view(b, s, HEADS, WIDTH // HEADS).transpose(1, 2)  # noqa: E731
        attended = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + self.out(attended.transpose(1, 2).reshape(b, s, WIDTH))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def build():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(3)
        return DecoderBlock().eval()


SIGNATURE = {"inputs": [("INPUT__0", "FP32", [SEQUENCE, WIDTH])], "max_batch_size": 1}


def example_inputs():
    return (torch.randn(1, SEQUENCE, WIDTH, generator=torch.Generator().manual_seed(0)),)
