# Loading a model archive in an interpreter: its entry point built by
# torch.package over the host's storages (one copy of the weights for every
# interpreter), in eval mode without gradients, on its device; and what of
# its tensors the model made itself (not mapped from the archive).
import torch

from manypy_model_runtime.calls import _guard_os_exit, _names, _serving_api
from manypy_model_runtime.compiled import track_if_compiled
from manypy_model_runtime.importer import (ArchiveImporter, SharedStorageReader, _bind_server_api,
                                           _hold_weakly_in_linecache, check_extern_modules)


def load(path, entry_point, storages, device="cpu", source=None, name=None):
    """Loads the model archived at `path` (named in messages), reading its
    code and pickles from `source` (the host's sealed copy of the archive)
    when given."""
    _guard_os_exit()
    api = _serving_api()
    if api is not None:
        api._enter(name or path)  # its import-time log lines name it
    importer = ArchiveImporter(source or path)
    if api is not None:
        _bind_server_api(importer, api)
    check_extern_modules(importer, path)
    importer.zip_reader = SharedStorageReader(importer.zip_reader, storages)
    kind = entry_point["kind"]
    if kind == "pickle":
        model = importer.load_pickle(entry_point["package"], entry_point["resource"])
    elif kind == "factory":
        module = importer.import_module(entry_point["module"])
        build = getattr(module, entry_point["function"])
        if entry_point.get("weights_resource"):
            model = build()  # its initial values, random or not, are all replaced below
        else:
            with _one_factory_at_a_time():
                model = build()
        if entry_point.get("weights_resource"):
            state = importer.load_pickle(entry_point["weights_package"],
                                         entry_point["weights_resource"])
            _assign_state(model, state)
    else:
        raise ValueError(f"unknown entry point kind {kind!r}")
    _hold_weakly_in_linecache(importer)
    track_if_compiled(model, name or path)
    if isinstance(model, torch.nn.Module):
        model.eval()
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        if device != "cpu":
            # Each interpreter moves its own copy: weights are shared on the
            # host, not on the device (one CUDA context serves them all).
            model.to(device)
    try:
        _names[model] = name or path
    except TypeError:  # an object that cannot be weakly referenced keeps "?"
        pass
    return model


class _one_factory_at_a_time:
    """A factory that makes its own weights (no weights resource) runs alone
    in the process: libtorch's default CPU generator, which torch.manual_seed
    seeds and nn.Linear's initial weights draw from, is one per process, not
    one per interpreter (torch/random.py:60 seeds torch._C.default_generator,
    ATen/CPUGeneratorImpl.h:43 getDefaultCPUGenerator in libtorch_cpu, which
    the interpreters share). Two interpreters building a seeded model at once
    interleaved their draws: each served different weights, and a compiled
    model with freezing (weights folded into its kernels) compiled twice and
    missed the compile cache at the next start (docs/debian13.md, trap 24).
    An flock on a file each interpreter opens (its own open file
    description) excludes the other interpreters' threads; waiting releases
    this interpreter's GIL."""

    def __enter__(self):
        import fcntl
        import os
        import tempfile
        path = os.path.join(tempfile.gettempdir(), "manypy-factory.lock")  # as boot.py's load lock
        self._fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise
        return self

    def __exit__(self, *exc):
        import os
        os.close(self._fd)  # and with it the lock
        return False


def _assign_state(model, state):
    """Makes the model's parameters and buffers the given (shared) tensors,
    by name, instead of copying into them as load_state_dict would. A
    torch.compile'd model's (an OptimizedModule) are those of the module it
    wraps, named as that module names them."""
    original = getattr(model, "_orig_mod", None)
    if isinstance(original, torch.nn.Module):
        model = original
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



def _storage_of(tensor):
    untyped = getattr(tensor, "untyped_storage", None)  # PyTorch 2.x
    return untyped() if untyped is not None else tensor.storage()


def owned_tensor_bytes(model, storages):
    """Bytes of the model's parameters and buffers that are not mapped from the
    archive (`storages`, the host's tensors): tensors its code made at load.
    libtorch holds them, so the host's tracemalloc count of the model's Python
    objects does not see them. Each storage is counted once."""
    if not isinstance(model, torch.nn.Module):
        return 0
    mapped = {_storage_of(t).data_ptr() for t in storages.values()}
    seen = set()
    total = 0
    for tensor in list(model.parameters()) + list(model.buffers()):
        storage = _storage_of(tensor)
        pointer = storage.data_ptr()
        if pointer in mapped or pointer in seen:
            continue
        seen.add(pointer)
        total += storage.nbytes()
    return total
