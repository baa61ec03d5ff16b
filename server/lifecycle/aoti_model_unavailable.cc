// Built where libtorch has no AOTInductor package loader (PyTorch < 2.6,
// Debian 12's 1.13): every torch_aoti archive is refused, naming both
// versions. aoti_model.cc is the real platform.
#include "server/lifecycle/aoti_model.h"

#include "interpreters/torch_version.h"

namespace manypy {

struct AotiModel::Impl {};

bool AotiModel::Available() { return false; }

AotiModel::AotiModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AotiModel::~AotiModel() = default;

StatusOr<std::unique_ptr<AotiModel>> AotiModel::Load(std::unique_ptr<PackageArchive> archive,
                                                     size_t /*concurrent_calls*/) {
  const Manifest& m = archive->manifest();
  const std::string compiled = m.packaged_with.torch.empty() ? "an unrecorded version"
                                                             : m.packaged_with.torch;
  return FailedPrecondition(archive->path() + ": platform torch_aoti, compiled by AOTInductor "
                            "under PyTorch " + compiled + ", but this server runs PyTorch " +
                            RunningTorchVersion() +
                            ", whose libtorch has no AOTInductor package loader (PyTorch >= "
                            "2.6): serve it from a manypy built on Debian 13, or package the "
                            "model for the Python or TorchScript platform");
}

const Manifest& AotiModel::manifest() const {
  static const Manifest none;
  return none;
}

MemoryFootprint AotiModel::Memory() const { return {}; }

StatusOr<std::vector<Value>> AotiModel::Run(size_t, const std::vector<Value>&, InterruptHook*) {
  return FailedPrecondition("the torch_aoti platform is not built in this server");
}

StatusOr<std::vector<Value>> AotiModel::RunReportingError(size_t, const std::vector<Value>&,
                                                          InterruptHook*, std::string*) {
  return FailedPrecondition("the torch_aoti platform is not built in this server");
}

}  // namespace manypy
