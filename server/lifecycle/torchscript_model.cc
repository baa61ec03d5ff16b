#include "server/lifecycle/torchscript_model.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>

#include <sstream>

#include "interpreters/torch_version.h"

namespace manypy {

struct TorchScriptModel::Impl {
  std::unique_ptr<PackageArchive> archive;
  torch::jit::Module module;
  c10::Device device{c10::kCPU};
  std::vector<std::string> output_names;
};

namespace {

// The model's result as one value per declared output, in manifest order:
// a tensor (one output), a tuple or list of tensors (one each, in order) or a
// dict of str to tensor (by name) -- what the Python platform accepts too.
StatusOr<std::vector<at::Tensor>> OutputTensors(const c10::IValue& result,
                                                const std::vector<std::string>& names) {
  std::vector<c10::IValue> values;
  if (result.isGenericDict()) {
    auto dict = result.toGenericDict();
    std::vector<std::string> missing;
    for (const auto& name : names) {
      auto it = dict.find(c10::IValue(name));
      if (it == dict.end()) {
        missing.push_back(name);
      } else {
        values.push_back(it->value());
      }
    }
    if (!missing.empty()) {
      std::string text;
      for (const auto& m : missing) text += (text.empty() ? "" : ", ") + m;
      return Internal("the model's result has no output(s) " + text);
    }
  } else if (result.isTuple() || result.isList()) {
    values = result.isTuple() ? result.toTupleRef().elements().vec() : result.toListRef().vec();
    if (values.size() != names.size())
      return Internal("the model returned " + std::to_string(values.size()) +
                      " values, the manifest declares " + std::to_string(names.size()) +
                      " outputs");
  } else {
    if (names.size() != 1)
      return Internal("the model returned one value, the manifest declares " +
                      std::to_string(names.size()) + " outputs");
    values.push_back(result);
  }
  std::vector<at::Tensor> tensors;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i].isTensor())
      return Internal("output '" + names[i] + "' is a " + values[i].tagKind() + ", not a tensor");
    tensors.push_back(values[i].toTensor());
  }
  return tensors;
}

}  // namespace

TorchScriptModel::TorchScriptModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchScriptModel::~TorchScriptModel() = default;

const Manifest& TorchScriptModel::manifest() const { return impl_->archive->manifest(); }

StatusOr<std::unique_ptr<TorchScriptModel>> TorchScriptModel::Load(
    std::unique_ptr<PackageArchive> archive) {
  const Manifest& m = archive->manifest();
  const std::string where = archive->path() + ": ";
  MANYPY_RETURN_IF_ERROR(CheckPackagedTorch(m, RunningTorchVersion(), archive->path()));
  for (const auto* list : {&m.inputs, &m.outputs}) {
    for (const auto& t : *list) {
      if (t.datatype == "BYTES")
        return InvalidArgument(where + "tensor '" + t.name +
                               "' is BYTES; the torchscript platform takes tensors only "
                               "(serve string inputs with platform manypy_python)");
    }
  }
  auto impl = std::make_unique<Impl>();
  if (m.device != "cpu") {
    if (!at::hasCUDA())
      return FailedPrecondition("model '" + m.name + "' asks for device '" + m.device +
                                "', but this server's libtorch was built without CUDA");
    impl->device = c10::Device(m.device);
  }
  const EntryPoint& ep = m.entry_point;
  auto bytes = archive->ReadEntry(ResourceEntryName(ep.package, ep.resource));
  if (!bytes.ok()) return bytes.status();
  try {
    std::istringstream stream(*bytes);
    impl->module = torch::jit::load(stream, impl->device);
  } catch (const std::exception& e) {
    return InvalidArgument(where + "the TorchScript module does not load: " + e.what());
  }
  impl->module.eval();
  if (!impl->module.find_method(m.method))
    return InvalidArgument(where + "the TorchScript module has no method '" + m.method + "'");
  for (const auto& o : m.outputs) impl->output_names.push_back(o.name);
  impl->archive = std::move(archive);
  return std::unique_ptr<TorchScriptModel>(new TorchScriptModel(std::move(impl)));
}

StatusOr<std::vector<Value>> TorchScriptModel::Run(size_t slot, const std::vector<Value>& inputs,
                                                   InterruptHook* hook) {
  std::string ignored;
  return RunReportingError(slot, inputs, hook, &ignored);
}

StatusOr<std::vector<Value>> TorchScriptModel::RunReportingError(size_t /*slot*/,
                                                                 const std::vector<Value>& inputs,
                                                                 InterruptHook* /*hook*/,
                                                                 std::string* error_type) {
  // As an interpreter session does: apply libtorch's intra-op thread count to
  // this thread before its first call, so an OpenMP BLAS does not use every core.
  thread_local bool threads_applied = false;
  if (!threads_applied) {
    at::get_num_threads();
    threads_applied = true;
  }
  const Manifest& m = manifest();
  try {
    c10::InferenceMode guard;
    std::vector<c10::IValue> args;
    args.reserve(inputs.size());
    for (const auto& v : inputs) {
      const at::Tensor& t = v.to_tensor();
      args.emplace_back(impl_->device.is_cpu() ? t : t.to(impl_->device));
    }
    c10::IValue result = impl_->module.get_method(m.method)(std::move(args));
    auto tensors = OutputTensors(result, impl_->output_names);
    if (!tensors.ok()) {
      *error_type = "RuntimeError";
      return Internal("model '" + m.name + "' failed: " + tensors.status().message());
    }
    std::vector<Value> outputs;
    outputs.reserve(tensors->size());
    for (auto& t : *tensors) outputs.emplace_back(impl_->device.is_cpu() ? t : t.cpu());
    return outputs;
  } catch (const c10::Error& e) {
    *error_type = "torch.jit.Error";
    return Internal("model '" + m.name + "' raised " + e.what_without_backtrace());
  } catch (const std::exception& e) {
    *error_type = "RuntimeError";
    return Internal("model '" + m.name + "' failed: " + e.what());
  }
}

}  // namespace manypy
