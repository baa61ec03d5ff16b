"""small_net: the Python-overhead-bound model of make bench-pool ("small":
20 x (Linear 8x8 + ReLU) in a Python loop, batch 1), which bench-pool's
interpreters import from here, and which make bench-overhead packages so that
the pool's and the server's figures are for the very same model. Weights
from torch.manual_seed(0), as bench-pool seeds them."""
import torch


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(20))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def build():
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return SmallNet().eval()
