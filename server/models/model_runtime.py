# Runs inside every manypy interpreter: loads a model archive with
# torch.package, taking tensor storages from the host's single mapping of the
# archive (so all interpreters share one copy of the weights), and calls it.
import torch
from torch.package import PackageImporter


class SharedStorageReader:
    """A torch.package zip reader whose storages are the host's tensors.

    PackageImporter.load_pickle fetches every storage through
    get_storage_from_record(name, numel, dtype) and only needs a tensor back;
    everything else is delegated to torch's own reader."""

    def __init__(self, reader, storages):
        self._reader = reader
        self._storages = storages

    def get_storage_from_record(self, name, numel, dtype):
        raw = self._storages.get(name)
        if raw is None:
            raise RuntimeError(f"archive storage {name!r} was not mapped by the host")
        tensor = raw.view(dtype)  # a view over the same bytes: no copy
        if tensor.numel() != numel:
            raise RuntimeError(
                f"archive storage {name!r} holds {tensor.numel()} elements of {dtype}, "
                f"the pickle expects {numel}")
        return tensor

    def __getattr__(self, attribute):
        return getattr(self._reader, attribute)


def _assign_state(model, state):
    """Makes the model's parameters and buffers the given (shared) tensors,
    by name, instead of copying into them as load_state_dict would."""
    own = dict(model.named_parameters())
    own.update(dict(model.named_buffers()))
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    if missing or unexpected:
        raise RuntimeError(f"weights do not match the model: missing {missing}, unexpected {unexpected}")
    for name, tensor in state.items():
        owner_name, _, leaf = name.rpartition(".")
        owner = model.get_submodule(owner_name) if owner_name else model
        if leaf in owner._parameters:
            owner._parameters[leaf] = torch.nn.Parameter(tensor, requires_grad=False)
        else:
            owner._buffers[leaf] = tensor


def load(path, entry_point, storages, device="cpu"):
    importer = PackageImporter(path)
    importer.zip_reader = SharedStorageReader(importer.zip_reader, storages)
    kind = entry_point["kind"]
    if kind == "pickle":
        model = importer.load_pickle(entry_point["package"], entry_point["resource"])
    elif kind == "factory":
        module = importer.import_module(entry_point["module"])
        model = getattr(module, entry_point["function"])()
        if entry_point.get("weights_resource"):
            state = importer.load_pickle(entry_point["weights_package"],
                                         entry_point["weights_resource"])
            _assign_state(model, state)
    else:
        raise ValueError(f"unknown entry point kind {kind!r}")
    if isinstance(model, torch.nn.Module):
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        if device != "cpu":
            # Each interpreter moves its own copy: weights are shared on the
            # host, not on the device (one CUDA context serves them all).
            model.to(device)
    return model


def _as_output_list(result, output_names):
    if isinstance(result, dict):
        missing = [n for n in output_names if n not in result]
        if missing:
            raise RuntimeError(f"the model's result has no output(s) {missing}; it returned keys "
                               f"{sorted(result)}")
        return [result[n] for n in output_names]
    if isinstance(result, (tuple, list)):
        if len(result) != len(output_names):
            raise RuntimeError(f"the model returned {len(result)} values, the manifest declares "
                               f"{len(output_names)} outputs {output_names}")
        return list(result)
    if len(output_names) != 1:
        raise RuntimeError(f"the model returned one value, the manifest declares "
                           f"{len(output_names)} outputs {output_names}")
    return [result]


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


def infer(model, method, output_names, device, inputs):
    """Calls the model with the inputs in manifest order and returns the
    outputs as a list in manifest order (on the CPU)."""
    call = model if not method or method == "forward" else getattr(model, method)
    if device != "cpu":
        inputs = [_to(i, device) for i in inputs]
    with torch.inference_mode():
        result = call(*inputs)
    outputs = _as_output_list(result, output_names)
    if device != "cpu":
        outputs = [_to(o, "cpu") for o in outputs]
    return outputs
