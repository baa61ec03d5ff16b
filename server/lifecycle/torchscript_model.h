// TorchScriptModel: the Executable of an archive for the `torchscript`
// platform. One TorchScript module, loaded once with libtorch, runs from the
// dispatcher's worker threads directly: no interpreter, no GIL, the same
// scheduler, batching and protocol as a Python model. Thread-safe: Run may be
// called from any number of threads at once (TorchScript methods are).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "package_format/archive.h"
#include "server/inference/executable.h"

namespace manypy {

class TorchScriptModel final : public Executable {
 public:
  /// Loads the module the archive's entry point names (platform torchscript).
  /// Errors: INVALID_ARGUMENT for a manifest this platform cannot serve (BYTES
  /// tensors) or a module libtorch cannot load, or whose method is missing;
  /// FAILED_PRECONDITION for a device this libtorch lacks.
  static StatusOr<std::unique_ptr<TorchScriptModel>> Load(
      std::unique_ptr<PackageArchive> archive);
  ~TorchScriptModel() override;

  const Manifest& manifest() const;

  /// Calls the module's method once on the calling thread (`slot` only names
  /// the worker). Not interruptible: TorchScript has no way to stop a running
  /// call, so `hook` is never armed and the execution limit only reports.
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook* hook) override;
  /// As Run; a failure's type ("torch.jit.Error") goes to `*error_type`.
  StatusOr<std::vector<Value>> RunReportingError(size_t slot, const std::vector<Value>& inputs,
                                                 InterruptHook* hook,
                                                 std::string* error_type) override;
  bool interruptible() const override { return false; }

 private:
  struct Impl;  // keeps torch/script.h out of this header
  explicit TorchScriptModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace manypy
