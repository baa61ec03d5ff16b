#include "server/core/inference_server.h"

#include <set>

#include "server/core/load_request.h"
#include "server/core/protocol_metadata.h"
#include "server/inference/cuda_support.h"

namespace manypy {

Status InferenceServer::RepositoryChangesAllowed(const char* verb) const {
  if (options_.explicit_model_control) return Status::Ok();
  // UNAVAILABLE, as Triton answers outside its explicit model control mode.
  return Unavailable(std::string(verb) +
                     " models on request is off: it needs --model-control-mode=explicit or on-demand");
}

void InferenceServer::LoadModel(const std::string& name, const std::vector<std::string>& parameters,
                                std::function<void(const Status&)> done) const {
  if (Status refused = CheckLoadParameters(parameters); !refused.ok()) return done(refused);
  if (Status off = RepositoryChangesAllowed("loading"); !off.ok()) return done(off);
  // Loading runs Python in every interpreter for seconds: never on a frontend's thread.
  models_->LoadAsync(name, std::move(done));
}

void InferenceServer::UnloadModel(const std::string& name,
                                  std::function<void(const Status&)> done) const {
  if (Status off = RepositoryChangesAllowed("unloading"); !off.ok()) return done(off);
  models_->UnloadAsync(name, std::move(done));
}

size_t InferenceServer::Drain(Clock::time_point deadline) {
  StartDraining();
  if (dispatcher_->Drain(deadline)) return 0;
  return dispatcher_->Abandon();
}

Status InferenceServer::ModelReady(const std::string& name, const std::string& version) const {
  auto model = models_->Get(name, version);
  return model.ok() ? Status::Ok() : model.status();
}

void InferenceServer::ServerMetadata(inference::ServerMetadataResponse* response) const {
  FillServerMetadata(response);
}

Status InferenceServer::ModelMetadata(const std::string& name, const std::string& version,
                                      inference::ModelMetadataResponse* response) const {
  // In on-demand mode from the archive's manifest when not loaded: asking
  // what a model takes must not load it.
  auto model = models_->Describe(name, version);
  if (!model.ok()) return model.status();
  FillModelMetadata(model->manifest, *models_, response);
  return Status::Ok();
}

Status InferenceServer::ModelConfig(const std::string& name, const std::string& version,
                                    inference::ModelConfigResponse* response) const {
  auto model = models_->Describe(name, version);
  if (!model.ok()) return model.status();
  FillModelConfig(model->manifest, model->settings, response);
  return Status::Ok();
}

Status InferenceServer::ModelStatistics(const std::string& name, const std::string& version,
                                        inference::ModelStatisticsResponse* response) const {
  if (name.empty()) {
    for (const auto& model : models_->ReadyModels()) {
      FillModelStatistics(*model, response->add_model_stats());
    }
    return Status::Ok();
  }
  auto model = models_->Get(name, version);
  if (!model.ok()) return model.status();
  FillModelStatistics(**model, response->add_model_stats());
  return Status::Ok();
}

Status InferenceServer::OpenAiModel(const std::string& name, OpenAiSpec* spec,
                                    inference::ModelMetadataResponse* metadata) const {
  auto model = models_->Describe(name, "");
  if (!model.ok()) return model.status();
  *spec = model->manifest.openai;
  FillModelMetadata(model->manifest, *models_, metadata);
  return Status::Ok();
}

std::vector<std::string> InferenceServer::OpenAiModels() const {
  std::set<std::string> names;
  for (const auto& status : models_->Index()) {
    if (names.count(status.name)) continue;
    // Describe answers for the models that serve now or load on request.
    auto model = models_->Describe(status.name, "");
    if (model.ok() && !model->manifest.openai.routes.empty()) names.insert(status.name);
  }
  return {names.begin(), names.end()};
}

void InferenceServer::RepositoryIndex(bool ready_only,
                                      inference::RepositoryIndexResponse* response) const {
  FillRepositoryIndex(*models_, ready_only, response);
}

Status InferenceServer::SystemSharedMemoryStatus(
    const WireConnection& connection, const std::string& name,
    inference::SystemSharedMemoryStatusResponse* response) const {
  MANYPY_RETURN_IF_ERROR(shared_memory_.Allowed(connection));
  auto regions = shared_memory_.regions().List(name);
  if (!regions.ok()) return regions.status();
  for (const auto& r : *regions) {
    auto& status = (*response->mutable_regions())[r.name];
    status.set_name(r.name);
    status.set_key(r.key);
    status.set_offset(r.offset);
    status.set_byte_size(r.byte_size);
  }
  return Status::Ok();
}

Status InferenceServer::SystemSharedMemoryRegister(
    const WireConnection& connection, const inference::SystemSharedMemoryRegisterRequest& request) {
  MANYPY_RETURN_IF_ERROR(shared_memory_.Allowed(connection));
  return shared_memory_.regions().Register(request.name(), request.key(), request.offset(),
                                           request.byte_size());
}

Status InferenceServer::SystemSharedMemoryUnregister(const WireConnection& connection,
                                                     const std::string& name) {
  MANYPY_RETURN_IF_ERROR(shared_memory_.Allowed(connection));
  shared_memory_.regions().Unregister(name);
  return Status::Ok();
}

Status InferenceServer::CudaSharedMemoryStatus(
    const WireConnection& connection, const std::string& name,
    inference::CudaSharedMemoryStatusResponse*) const {
  MANYPY_RETURN_IF_ERROR(shared_memory_.Allowed(connection));
  if (!name.empty()) return NotFound("no CUDA shared memory region named '" + name + "' is registered");
  return Status::Ok();  // none ever is
}

Status InferenceServer::CudaSharedMemoryRegister(
    const WireConnection& connection, const inference::CudaSharedMemoryRegisterRequest& request) const {
  MANYPY_RETURN_IF_ERROR(shared_memory_.Allowed(connection));
  const std::string region = "CUDA shared memory region '" + request.name() + "' refused: ";
  if (!LibtorchHasCuda()) {
    return FailedPrecondition(region + "this server's libtorch is CPU-only (no CUDA device to map "
                              "it on); send tensors through system shared memory instead");
  }
  return FailedPrecondition(region + "manypy maps system shared memory only; send tensors "
                            "through system shared memory instead");
}

Status InferenceServer::CudaSharedMemoryUnregister(const WireConnection& connection,
                                                   const std::string&) const {
  return shared_memory_.Allowed(connection);  // nothing is registered: nothing to do
}

}  // namespace manypy
