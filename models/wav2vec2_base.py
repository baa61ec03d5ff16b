"""wav2vec2_base: torchaudio's wav2vec 2.0 base model (12 transformer
layers, 95M parameters), random weights (seed 2), through Debian's
python3-torchaudio, which the server's Python must have (the archive
externs torchaudio, like any installed package).

Called with waveforms only, it returns (features, None) (no lengths given,
none returned): export leaves the None out, so the archive serves one
output, OUTPUT__0 (element 0 of the result).

Signature: INPUT__0 FP32 [16000] (1 s of 16 kHz mono audio) -> OUTPUT__0
FP32 [49, 768] (one feature vector per 20 ms frame), batch dimension first,
up to 4 per call, dynamic batching.
"""
import torch
import torchaudio

SIGNATURE = {
    "inputs": [{"name": "INPUT__0", "datatype": "FP32", "shape": [16000]}],
    "outputs": [{"name": "OUTPUT__0", "datatype": "FP32", "shape": [49, 768]}],
    "max_batch_size": 4,
    "batching": {"dynamic": True, "max_queue_delay_microseconds": 1000},
    "description": "torchaudio wav2vec2_base, random weights (seed 2); 1 s of 16 kHz audio -> "
                   "[49, 768] features (the model's None second output left out)",
}


def build():
    """The model in eval mode; the global RNG state is left untouched."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        model = torchaudio.models.wav2vec2_base()
    return model.eval()


def example_inputs(batch_size=1):
    """One call's inputs: a batch of 1 s random waveforms."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 16000, generator=gen) * 0.1,)
