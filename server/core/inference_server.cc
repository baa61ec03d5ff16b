#include "server/core/inference_server.h"

#include "server/core/load_request.h"
#include "server/core/protocol_metadata.h"

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

void InferenceServer::RepositoryIndex(bool ready_only,
                                      inference::RepositoryIndexResponse* response) const {
  FillRepositoryIndex(*models_, ready_only, response);
}

}  // namespace manypy
