# manypy_model_runtime: what runs inside every manypy interpreter to load a
# model archive with torch.package (tensor storages taken from the host's
# single mapping of the archive, so all interpreters share one copy of the
# weights) and to call it. Imports only the standard library and torch.
#
# One source, imported by this name everywhere: manypy-server embeds these
# files at build time (server/CMakeLists.txt) and defines them in each
# interpreter, the modules first, this package last
# (server/lifecycle/model_runtime.cc); the packaging tool imports it from
# package_format/python (manypy.package.load_model, the load check), where
# host.py, which the server leaves out, plays the server's part. Its modules refer to each other by their
# full names (the server's copies have no folder to import from).
#
# What the host calls, by job:
#   loading.py   load, owned_tensor_bytes
#   calls.py     infer, start_stream (Stream), drop_sequence_states
#   batched.py   batch_size, start_batch (Batch): continuous batching's start/step
#   compiled.py  import_compiler, is_compiled (torch.compile'd models)
#   importer.py  check_extern_modules, the archive's importer
#   outputs.py   the outputs a result gives, in manifest order
#   errors.py    MissingModulesError, CompileToolchainError, ModelOutputError
from manypy_model_runtime.batched import Batch, batch_size, start_batch
from manypy_model_runtime.calls import Stream, drop_sequence_states, infer, start_stream
from manypy_model_runtime.compiled import import_compiler, is_compiled
from manypy_model_runtime.errors import (CompileToolchainError, MissingModulesError,
                                         ModelOutputError)
from manypy_model_runtime.importer import check_extern_modules
from manypy_model_runtime.loading import load, owned_tensor_bytes
from manypy_model_runtime.outputs import _as_output_list

__all__ = ["Batch", "CompileToolchainError", "MissingModulesError", "ModelOutputError", "Stream",
           "_as_output_list", "check_extern_modules", "drop_sequence_states", "import_compiler",
           "infer", "is_compiled", "load", "owned_tensor_bytes", "start_stream",
           "batch_size", "start_batch"]
