// AotiModel: the Executable of an archive for the `torch_aoti` platform. Its
// AOTInductor package (a .pt2 holding a compiled shared object) runs from the
// dispatcher's worker threads with libtorch's AOTIModelPackageLoader: no
// interpreter, no GIL. Thread-safe: concurrent calls each get a loader of their own.
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
  /// AOTIModelPackageLoader: PyTorch >= 2.6).
  static bool Available();

  /// Loads the package the archive's entry point names (platform torch_aoti)
  /// with one loader, which also proves it loads. Errors: FAILED_PRECONDITION
  /// when this server's libtorch has no loader (1.13) or is another release
  /// than the one the archive was compiled with (both versions named), or for
  /// a device other than cpu; INVALID_ARGUMENT for BYTES tensors or a package
  /// the loader refuses.
  static StatusOr<std::unique_ptr<AotiModel>> Load(std::unique_ptr<PackageArchive> archive);
  ~AotiModel() override;

  const Manifest& manifest() const;

  /// Runs the compiled model once on the calling thread with a loader no
  /// other call is using (one more is made, from the archive, the first time
  /// a call finds them all busy: the dispatcher's instance_count bounds how
  /// many). A loader runs its calls one at a time (its model container holds
  /// one model), hence one per concurrent call. Not interruptible: compiled
  /// code has no way to stop a running call, so `hook` is never armed.
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook* hook) override;
  /// As Run; a failure's type ("c10::Error", "RuntimeError") goes to `*error_type`.
  StatusOr<std::vector<Value>> RunReportingError(size_t slot, const std::vector<Value>& inputs,
                                                 InterruptHook* hook,
                                                 std::string* error_type) override;
  bool interruptible() const override { return false; }

  /// Loaders made so far (one per call that ran concurrently with others).
  size_t loaders() const;

 private:
  struct Impl;  // keeps libtorch's AOTInductor headers out of this header
  explicit AotiModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace manypy
