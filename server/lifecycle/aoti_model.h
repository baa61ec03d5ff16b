// AotiModel: the Executable of an archive for the `torch_aoti` platform. Its
// AOTInductor package (a .pt2 holding a compiled shared object) runs from the
// dispatcher's worker threads in libtorch's AOTInductor runtime: no
// interpreter, no GIL. Thread-safe: up to `concurrent_calls` calls run at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "package_format/archive.h"
#include "server/inference/executable.h"

namespace manypy {

class AotiModel final : public Executable {
 public:
  /// Whether this build can serve torch_aoti archives (its libtorch has
  /// AOTInductor's package runtime: PyTorch >= 2.6).
  static bool Available();

  /// Loads the package the archive's entry point names (platform torch_aoti)
  /// as AOTIModelPackageLoader does -- its compiled shared object, loaded by
  /// AOTIModelContainerRunnerCpu -- but with a container of
  /// `concurrent_calls` models (the server's slots) where the 2.6 loader
  /// makes one: the models share one set of weights, and each runs one call
  /// at a time. Errors: FAILED_PRECONDITION when this server's libtorch has no
  /// AOTInductor runtime (1.13) or is another release than the one the
  /// archive was compiled with (both versions named), or for a package not
  /// compiled for the CPU; INVALID_ARGUMENT for BYTES tensors or a package
  /// the runtime refuses.
  static StatusOr<std::unique_ptr<AotiModel>> Load(std::unique_ptr<PackageArchive> archive,
                                                   size_t concurrent_calls);
  ~AotiModel() override;

  const Manifest& manifest() const;

  /// Runs the compiled model once on the calling thread, on a model of the
  /// container no other call is using (a call beyond `concurrent_calls`
  /// waits for one). Not interruptible: compiled code has no way to stop a
  /// running call, so `hook` is never armed.
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook* hook) override;
  /// As Run; a failure's type ("c10::Error", "RuntimeError") goes to `*error_type`.
  StatusOr<std::vector<Value>> RunReportingError(size_t slot, const std::vector<Value>& inputs,
                                                 InterruptHook* hook,
                                                 std::string* error_type) override;
  bool interruptible() const override { return false; }
  /// The compiled shared object's size, as shared bytes: its code and
  /// constants (the weights, prepacked or not) are mapped once for all the
  /// container's models. What the kernels allocate during a call is not
  /// counted (as for TorchScript, which counts nothing).
  MemoryFootprint Memory() const override;

 private:
  struct Impl;  // keeps libtorch's AOTInductor headers out of this header
  explicit AotiModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace manypy
