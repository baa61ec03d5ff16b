// Built where libtorch has AOTInductor's package runtime (MANYPY_WITH_AOTI,
// server/CMakeLists.txt); aoti_model_unavailable.cc elsewhere.
//
// Why not AOTIModelPackageLoader itself: in 2.6 it always builds its runner
// with one model (model_package_loader.cpp: `registered_aoti_runner[device](
// so_path, 1, ...)`), whose container runs one call at a time (model_container.h:
// get_available_model waits for the busy one). Concurrent calls then need a
// loader each, and each loader unzips and maps its own copy of the shared
// object and copies its own prepacked weights: resnet50 with 2 instances
// peaked at 732 MiB against the Python platform's 533. This file does what
// the loader does for a CPU package (unzip the .so, read the device, build
// AOTIModelContainerRunnerCpu) with one container of N models, which share
// one set of weights (the container's constants map).
#include "server/lifecycle/aoti_model.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner_cpu.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "interpreters/torch_version.h"
#include "server/lifecycle/aoti_package.h"

namespace manypy {

using Runner = torch::inductor::AOTIModelContainerRunnerCpu;

struct AotiModel::Impl {
  std::unique_ptr<PackageArchive> archive;
  std::unique_ptr<Runner> runner;  // thread-safe: its container hands each call a free model
  // The compiled shared object's size: what the load mapped, the weights
  // included, once for every model of the container (Memory()).
  int64_t so_bytes = 0;
};

namespace {

// Copies [offset, offset + size) of `from` to the end of `to` a chunk at a
// time: the shared object never sits whole in this process's memory (with
// the .pt2 read into a string and the .so copied out of it, resnet50's load
// held two copies of its weights on the heap at once: the peak RSS target).
bool CopyRange(int from, uint64_t offset, uint64_t size, FILE* to) {
  std::vector<char> chunk(std::min<uint64_t>(size, uint64_t{1} << 20));
  while (size > 0) {
    ssize_t n = pread(from, chunk.data(), std::min<uint64_t>(size, chunk.size()),
                      static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;  // the archive shrank under us
      return false;
    }
    if (fwrite(chunk.data(), 1, static_cast<size_t>(n), to) != static_cast<size_t>(n)) return false;
    offset += static_cast<uint64_t>(n);
    size -= static_cast<uint64_t>(n);
  }
  return true;
}

// The runtime loads the shared object by path (dlopen): it is copied out of
// the archive's file into a private temporary folder ($TMPDIR, else /tmp) for
// the constructor and removed right after, the mapping staying valid (Linux
// keeps an unlinked file's pages while they are mapped). Its constants (the
// weights) are used in place in that mapping (aoti_runtime/model.h
// load_constants on the CPU), so they are resident once, as file pages.
StatusOr<std::unique_ptr<Runner>> MakeRunner(const PackageArchive& archive,
                                             const AotiPackage& package, size_t models) {
  const std::string& where = archive.path();
  const char* tmpdir = std::getenv("TMPDIR");
  std::string folder = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/manypy-aoti-XXXXXX";
  if (mkdtemp(folder.data()) == nullptr)
    return Internal(where + ": cannot make a temporary folder for the compiled model in " +
                    folder + ": " + std::strerror(errno));
  const std::string path = folder + "/" + package.so_name;
  Status written = Status::Ok();
  FILE* f = fopen(path.c_str(), "wb");
  bool copied = f != nullptr && CopyRange(archive.fd(), package.so_offset, package.so_size, f);
  if (f != nullptr && fclose(f) != 0) copied = false;
  if (!copied)
    written = Internal(where + ": cannot copy the compiled model to " + path + ": " +
                       std::strerror(errno));
  StatusOr<std::unique_ptr<Runner>> runner = written;
  if (written.ok()) {
    try {
      runner = std::make_unique<Runner>(path, models);
    } catch (const c10::Error& e) {
      runner = InvalidArgument(where + ": the AOTInductor package does not load: " +
                               e.what_without_backtrace());
    } catch (const std::exception& e) {
      runner = InvalidArgument(where + ": the AOTInductor package does not load: " + e.what());
    }
  }
  unlink(path.c_str());
  rmdir(folder.c_str());
  return runner;
}

}  // namespace

bool AotiModel::Available() { return true; }

AotiModel::AotiModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
AotiModel::~AotiModel() = default;

const Manifest& AotiModel::manifest() const { return impl_->archive->manifest(); }

StatusOr<std::unique_ptr<AotiModel>> AotiModel::Load(std::unique_ptr<PackageArchive> archive,
                                                     size_t concurrent_calls) {
  const Manifest& m = archive->manifest();
  const std::string& where = archive->path();
  MANYPY_RETURN_IF_ERROR(CheckCompiledTorch(m, RunningTorchVersion(), where));
  if (m.device != "cpu")
    return FailedPrecondition(where + ": device '" + m.device +
                              "': manypy serves AOTInductor archives compiled for the CPU only");
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const auto& t : *list) {
      if (t.datatype == "BYTES")
        return InvalidArgument(where + ": tensor '" + t.name +
                               "' is BYTES; the torch_aoti platform takes tensors only "
                               "(serve string inputs with platform manypy_python)");
    }
  }
  auto package =
      ReadAotiPackage(*archive, ResourceEntryName(m.entry_point.package, m.entry_point.resource));
  if (!package.ok()) return package.status();
  if (package->device != "cpu")
    return FailedPrecondition(where + ": the AOTInductor package was compiled for device '" +
                              package->device + "'; manypy serves CPU packages only");
  auto impl = std::make_unique<Impl>();
  auto runner = MakeRunner(*archive, *package, concurrent_calls > 0 ? concurrent_calls : 1);
  if (!runner.ok()) return runner.status();
  impl->runner = std::move(*runner);
  impl->so_bytes = static_cast<int64_t>(package->so_size);
  impl->archive = std::move(archive);
  return std::unique_ptr<AotiModel>(new AotiModel(std::move(impl)));
}

MemoryFootprint AotiModel::Memory() const { return {impl_->so_bytes, {}}; }

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
  try {
    c10::InferenceMode guard;
    std::vector<at::Tensor> args;
    args.reserve(inputs.size());
    // The compiled kernels index with the strides they were traced with
    // (contiguous); a request's tensors already are, so this copies nothing.
    for (const auto& v : inputs) args.push_back(v.to_tensor().contiguous());
    std::vector<at::Tensor> outs = impl_->runner->run(args);
    if (outs.size() != m.outputs.size()) {
      *error_type = "RuntimeError";
      return Internal("model '" + m.name + "' returned " + std::to_string(outs.size()) +
                      " outputs, the manifest declares " + std::to_string(m.outputs.size()));
    }
    std::vector<Value> outputs;
    outputs.reserve(outs.size());
    for (auto& t : outs) outputs.emplace_back(std::move(t));
    return outputs;
  } catch (const c10::Error& e) {
    *error_type = "c10::Error";
    return Internal("model '" + m.name + "' raised " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    *error_type = "RuntimeError";
    return Internal("model '" + m.name + "' failed: " + e.what());
  }
}

}  // namespace manypy
