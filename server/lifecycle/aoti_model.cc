// Built where libtorch has AOTInductor's package loader (MANYPY_WITH_AOTI,
// server/CMakeLists.txt); aoti_model_unavailable.cc elsewhere.
#include "server/lifecycle/aoti_model.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "interpreters/torch_version.h"

namespace manypy {

using Loader = torch::inductor::AOTIModelPackageLoader;

struct AotiModel::Impl {
  // Constant after Load.
  std::unique_ptr<PackageArchive> archive;
  std::string entry;  // the .pt2's name in the archive
  // Loaders not running a call now, and how many were made.
  mutable std::mutex mu;
  std::vector<std::unique_ptr<Loader>> idle;  // guarded by mu
  size_t made = 0;                            // guarded by mu
};

namespace {

// A loader of the archive's package. AOTIModelPackageLoader opens a .pt2 by
// path (it unzips the shared object into a folder of its own, removed with
// the loader), so the package is written to a temporary file for the time of
// the constructor and removed right after.
StatusOr<std::unique_ptr<Loader>> MakeLoader(const PackageArchive& archive,
                                             const std::string& entry) {
  auto bytes = archive.ReadEntry(entry);
  if (!bytes.ok()) return bytes.status();
  const char* tmpdir = std::getenv("TMPDIR");
  std::string path = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/manypy-aoti-XXXXXX";
  int fd = mkstemp(path.data());
  if (fd < 0)
    return Internal(archive.path() + ": cannot make a temporary file for the AOTInductor "
                    "package in " + path + ": " + std::strerror(errno));
  size_t written = 0;
  while (written < bytes->size()) {
    ssize_t n = write(fd, bytes->data() + written, bytes->size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      close(fd);
      unlink(path.c_str());
      return Internal(archive.path() + ": cannot write the AOTInductor package to " + path +
                      ": " + why);
    }
    written += static_cast<size_t>(n);
  }
  close(fd);
  try {
    auto loader = std::make_unique<Loader>(path);
    unlink(path.c_str());
    return loader;
  } catch (const c10::Error& e) {
    unlink(path.c_str());
    return InvalidArgument(archive.path() + ": the AOTInductor package does not load: " +
                           e.what_without_backtrace());
  } catch (const std::exception& e) {
    unlink(path.c_str());
    return InvalidArgument(archive.path() + ": the AOTInductor package does not load: " +
                           e.what());
  }
}

}  // namespace

bool AotiModel::Available() { return true; }

AotiModel::AotiModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AotiModel::~AotiModel() = default;

const Manifest& AotiModel::manifest() const { return impl_->archive->manifest(); }

size_t AotiModel::loaders() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->made;
}

StatusOr<std::unique_ptr<AotiModel>> AotiModel::Load(std::unique_ptr<PackageArchive> archive) {
  const Manifest& m = archive->manifest();
  const std::string where = archive->path() + ": ";
  MANYPY_RETURN_IF_ERROR(CheckCompiledTorch(m, RunningTorchVersion(), archive->path()));
  if (m.device != "cpu")
    return FailedPrecondition(where + "device '" + m.device +
                              "': manypy serves AOTInductor archives compiled for the CPU only");
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const auto& t : *list) {
      if (t.datatype == "BYTES")
        return InvalidArgument(where + "tensor '" + t.name +
                               "' is BYTES; the torch_aoti platform takes tensors only "
                               "(serve string inputs with platform manypy_python)");
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->entry = ResourceEntryName(m.entry_point.package, m.entry_point.resource);
  auto first = MakeLoader(*archive, impl->entry);
  if (!first.ok()) return first.status();
  impl->idle.push_back(std::move(*first));
  impl->made = 1;
  impl->archive = std::move(archive);
  return std::unique_ptr<AotiModel>(new AotiModel(std::move(impl)));
}

StatusOr<std::vector<Value>> AotiModel::Run(size_t slot, const std::vector<Value>& inputs,
                                            InterruptHook* hook) {
  std::string ignored;
  return RunReportingError(slot, inputs, hook, &ignored);
}

StatusOr<std::vector<Value>> AotiModel::RunReportingError(size_t /*slot*/,
                                                          const std::vector<Value>& inputs,
                                                          InterruptHook* /*hook*/,
                                                          std::string* error_type) {
  // As TorchScriptModel does: libtorch's intra-op thread count applied to this
  // thread before its first call (the compiled kernels' OpenMP regions use it).
  thread_local bool threads_applied = false;
  if (!threads_applied) {
    at::get_num_threads();
    threads_applied = true;
  }
  const Manifest& m = manifest();
  std::unique_ptr<Loader> loader;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->idle.empty()) {
      loader = std::move(impl_->idle.back());
      impl_->idle.pop_back();
    }
  }
  if (loader == nullptr) {  // every loader is running a call: one more instance
    auto made = MakeLoader(*impl_->archive, impl_->entry);
    if (!made.ok()) {
      *error_type = "RuntimeError";
      return Internal("model '" + m.name + "' could not make another runner: " +
                      made.status().message());
    }
    loader = std::move(*made);
    std::lock_guard<std::mutex> lock(impl_->mu);
    ++impl_->made;
  }
  StatusOr<std::vector<Value>> result = Internal("");
  try {
    c10::InferenceMode guard;
    std::vector<at::Tensor> args;
    args.reserve(inputs.size());
    // The compiled kernels index with the strides they were traced with
    // (contiguous); a request's tensors already are, so this copies nothing.
    for (const auto& v : inputs) args.push_back(v.to_tensor().contiguous());
    std::vector<at::Tensor> outs = loader->run(args);
    if (outs.size() != m.outputs.size()) {
      *error_type = "RuntimeError";
      result = Internal("model '" + m.name + "' returned " + std::to_string(outs.size()) +
                        " outputs, the manifest declares " + std::to_string(m.outputs.size()));
    } else {
      std::vector<Value> outputs;
      outputs.reserve(outs.size());
      for (auto& t : outs) outputs.emplace_back(std::move(t));
      result = std::move(outputs);
    }
  } catch (const c10::Error& e) {
    *error_type = "c10::Error";
    result = Internal("model '" + m.name + "' raised " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    *error_type = "RuntimeError";
    result = Internal("model '" + m.name + "' failed: " + e.what());
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->idle.push_back(std::move(loader));
  return result;
}

}  // namespace manypy
