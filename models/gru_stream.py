"""gru_stream: a streaming recurrent model that keeps its hidden state per sequence.

A one-layer GRU (8 features in, hidden 16) over audio-like feature frames,
random weights (torch.manual_seed(5)). Served as a stateful sequence model
(manifest `sequence_batching`): a client sends a stream's frames in chunks,
one request per chunk, with the parameters sequence_id, sequence_start (first
chunk) and sequence_end (last chunk); between chunks the GRU's hidden state
waits in manypy.request.state, in the interpreter that runs the whole
sequence. The outputs of the chunks, joined, equal those of the whole input
run at once (within float rounding). Outside a sequence (packaging, a server
without sequences) each request starts from a zero state.

Signature: frames FP32 [-1, 8] (time x features) -> hidden FP32 [-1, 16],
the GRU's output for every frame.
"""
import torch
from torch import nn

import manypy

FEATURES = 8
HIDDEN = 16

SIGNATURE = {
    "inputs": [{"name": "frames", "datatype": "FP32", "shape": [-1, FEATURES]}],
    "outputs": [{"name": "hidden", "datatype": "FP32", "shape": [-1, HIDDEN]}],
    "description": "GRU over feature frames keeping its hidden state per sequence, random weights",
    "sequence_batching": {"max_sequence_idle_microseconds": 5000000},
}


class GruStream(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(FEATURES, HIDDEN, batch_first=True)

    def forward(self, frames):
        state = manypy.request.state  # None outside a sequence
        h = state.get("h") if state is not None else None
        out, h = self.rnn(frames.unsqueeze(0), h)
        if state is not None:
            state["h"] = h
            state["frames"] = state.get("frames", 0) + frames.shape[0]
        return out.squeeze(0)


def build():
    torch.manual_seed(5)
    return GruStream().eval()


def example_inputs():
    return (torch.randn(4, FEATURES, generator=torch.Generator().manual_seed(1)),)
