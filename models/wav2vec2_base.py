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
    # torchaudio 2.x puts weight_norm on the positional convolution as a
    # parametrization, which pickling refuses ("Serialization of parametrized
    # modules is only supported through state_dict()"): fold it into a plain
    # weight (the same values; inference only), and drop the local
    # load_state_dict hook weight_norm left (it converts old checkpoints, and
    # a local function cannot be pickled). torchaudio 0.13 has neither.
    parametrize = getattr(torch.nn.utils, "parametrize", None)
    if parametrize is not None:
        for module in model.modules():
            if not parametrize.is_parametrized(module):
                continue
            for name in list(module.parametrizations):
                parametrize.remove_parametrizations(module, name, leave_parametrized=True)
            hooks = module._load_state_dict_pre_hooks
            for key in [k for k, h in hooks.items()
                        if "_weight_norm_compat_hook" in getattr(getattr(h, "hook", h), "__qualname__", "")]:
                del hooks[key]
    return model.eval()


def example_inputs(batch_size=1):
    """One call's inputs: a batch of 1 s random waveforms."""
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(batch_size, 16000, generator=gen) * 0.1,)
