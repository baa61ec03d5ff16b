// Manifest: the typed form of an archive's manypy/manifest.json (package_format/SCHEMA.md,
// schema versions 1 and 2), its validating parser and its writer. Plain values and pure functions:
// safe to use from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "package_format/openai_spec.h"

namespace manypy {

/// One input or output of the model, in Open Inference Protocol terms.
struct TensorSpec {
  std::string name;
  std::string datatype;        ///< a v2 name: BOOL, UINT8, ..., FP32, FP64, BYTES
  std::vector<int64_t> shape;  ///< -1 = variable; without the batch dimension
  bool operator==(const TensorSpec& o) const;
};

struct BatchingSpec {
  bool dynamic = false;
  std::vector<int64_t> preferred_batch_sizes;
  int64_t max_queue_delay_microseconds = 0;
  bool operator==(const BatchingSpec& o) const;
};

/// Stateful sequences (Triton's sequence batcher, direct strategy): the
/// requests of one sequence run in order on one interpreter, and the model's
/// Python keeps a state per sequence (manypy.request.state).
struct SequenceBatchingSpec {
  bool enabled = false;  ///< the manifest has a `sequence_batching` object
  /// A sequence with no request for this long is ended (its state dropped).
  int64_t max_sequence_idle_microseconds = 1000000;
  /// Sequences of the model active at once; a start beyond is refused.
  int64_t max_concurrent_sequences = 256;
  bool operator==(const SequenceBatchingSpec& o) const;
};

/// How the server gets the model object out of the archive.
struct EntryPoint {
  std::string kind = "pickle";         ///< "pickle", "factory", "torchscript" or "aoti"
  std::string package = "model";       ///< pickle, torchscript, aoti: the entry's package ...
  std::string resource = "model.pkl";  ///< ... and resource (torchscript: model.pt, aoti: model.pt2)
  std::string module;                  ///< factory: an interned module ...
  std::string function;          ///< ... and a zero-argument callable in it returning the model
  std::string weights_package;   ///< factory, optional (both empty = none): a pickled
  std::string weights_resource;  ///< state dict loaded into the model by name
  bool operator==(const EntryPoint& o) const;
};

/// The platforms an archive may name: Python run by the interpreters, a TorchScript
/// module run by libtorch from C++ with no interpreter, or an AOTInductor package (a
/// compiled shared object, torch.export + aoti_compile_and_package) run from C++ too.
inline constexpr const char* kPythonPlatform = "manypy_python";
inline constexpr const char* kTorchScriptPlatform = "torchscript";
inline constexpr const char* kAotiPlatform = "torch_aoti";

/// What an archive was packaged with (schema version 2; all empty in version 1 archives).
struct PackagedWith {
  std::string torch;   ///< torch.__version__, e.g. "2.6.0+debian"
  std::string python;  ///< e.g. "3.13.5"
  std::string manypy;  ///< manypy.__version__ of the packaging tool
  bool operator==(const PackagedWith& o) const;
};

/// The newest manifest schema this reader knows (it reads every version from 1 up).
inline constexpr int64_t kManifestSchemaVersion = 2;

struct Manifest {
  int64_t schema_version = 1;  ///< 2 (kManifestSchemaVersion) records packaged_with
  std::string name;
  int64_t version = 1;
  std::string platform = "manypy_python";
  EntryPoint entry_point;
  std::string method = "forward";  ///< "forward" means calling `model(...)`
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  int64_t max_batch_size = 0;  ///< 0 = the model takes no batch dimension
  BatchingSpec batching;
  int64_t instance_count = 0;  ///< 0 = one instance per interpreter
  int64_t max_queue_size = 0;  ///< queued requests allowed; 0 = the server's default
  int64_t max_execution_seconds = 0;  ///< a longer call is interrupted; 0 = the server's default
  int64_t default_timeout_microseconds = 0;  ///< deadline of requests without one; 0 = none
  std::string device = "cpu";  ///< "cpu", "cuda" or "cuda:N"
  std::string description;
  /// The model's method is a generator (or returns an iterator): each value it
  /// yields is one response (Triton's decoupled transaction policy).
  bool streaming = false;
  /// The server may answer a request equal to an earlier one from its
  /// response cache (the model is a pure function of its inputs).
  bool response_cache = false;
  SequenceBatchingSpec sequence_batching;
  /// The OpenAI routes the model serves and how (docs/text-generation.md); no routes = none.
  OpenAiSpec openai;
  PackagedWith packaged_with;  ///< required from schema version 2
  bool operator==(const Manifest& o) const;
};

/// Parses and validates a manifest against every rule of SCHEMA.md. Errors are
/// INVALID_ARGUMENT naming the archive and the field, e.g. "model.mpk: manifest field
/// 'inputs[1].datatype': unknown datatype 'FLOAT32' (expected one of BOOL, UINT8, ...)".
/// Unknown fields (top level and nested objects) and duplicate keys are rejected.
StatusOr<Manifest> ParseManifest(const std::string& json_text,
                                 const std::string& archive_for_errors);

/// The manifest as JSON, every field written (defaults too): ParseManifest(ManifestToJson(m))
/// gives back m for any valid m.
std::string ManifestToJson(const Manifest& manifest);

/// The batch-dimension rule of dynamic batching, the one place it is written:
/// requests can only be joined along a batch dimension, so `dynamic` needs
/// max_batch_size > 0. Empty when it holds, else why not.
std::string DynamicBatchingProblem(bool dynamic, int64_t max_batch_size);

/// The streaming rules: only a Python model streams, and never with dynamic
/// batching (each request's generator yields its own responses). Empty when
/// they hold (or the model does not stream), else why not.
std::string StreamingProblem(const Manifest& manifest);

/// The sequence rules, the one place they are written (the manifest and
/// --model-config overrides): only a Python model keeps per-sequence state,
/// never one that batches dynamically or whose answers are cached (`dynamic`,
/// `response_cache`: the settings in force), nor one that streams. Empty when
/// they hold, else why not.
std::string SequenceBatchingProblem(const Manifest& manifest, bool dynamic, bool response_cache);

/// Ok when a server running PyTorch `server_torch` (e.g. "1.13.1") can load an archive
/// with `manifest`: one packaged under a newer major.minor PyTorch cannot be (its pickles
/// may name classes and arguments an older torch lacks), which is FAILED_PRECONDITION
/// naming the archive and both versions. Version 1 archives (no packaged_with) load.
Status CheckPackagedTorch(const Manifest& manifest, const std::string& server_torch,
                          const std::string& archive_for_errors);

/// Ok when a server running PyTorch `server_torch` can run the AOTInductor package of a
/// torch_aoti archive: the same release (major.minor.patch) as the one it was compiled
/// with (packaged_with.torch), since the compiled code calls libtorch's C shim and kernels
/// of that release. Otherwise FAILED_PRECONDITION naming the archive and both versions.
Status CheckCompiledTorch(const Manifest& manifest, const std::string& server_torch,
                          const std::string& archive_for_errors);

/// True for the Open Inference Protocol datatype names SCHEMA.md allows (those of
/// common/datatype.h's table).
bool IsValidDatatype(const std::string& datatype);
/// Bytes per element: 1 for BOOL, 4 for FP32, ...; -1 for BYTES and for unknown names.
int64_t DatatypeByteSize(const std::string& datatype);

}  // namespace manypy
