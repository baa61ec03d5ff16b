#include "server/grpc/grpc_frontend.h"

#include <thread>

#include "server/grpc/grpc_status.h"
#include "server/grpc/grpc_stream.h"
#include "server/grpc/protocol_metadata.h"
#include "server/inference/prepare.h"
#include "server/inference/output_encoder.h"

namespace manypy {
namespace {

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const grpc::Status& status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx, const Status& status) {
  return Done(ctx, ToGrpcStatus(status));
}

Clock::time_point SteadyDeadline(const grpc::CallbackServerContext* ctx) {
  auto left = ctx->deadline() - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return Clock::time_point::max();  // none given
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
}

RequestPtr PrepareFromWire(ModelManager* models, const inference::ModelInferRequest& wire,
                           grpc::CallbackServerContext* ctx, std::shared_ptr<Model>* model,
                           Status* status) {
  auto request = std::make_unique<InferenceRequest>();
  request->times.received = Clock::now();
  auto found = models->Get(wire.model_name(), wire.model_version());
  if (!found.ok()) {
    *status = found.status();
    return request;
  }
  *model = std::move(*found);
  *status = PrepareRequest(wire, (*model)->manifest(), (*model)->settings().default_timeout,
                           SteadyDeadline(ctx), request.get());
  request->cancelled = [ctx] { return ctx->IsCancelled(); };
  request->times.prepared = Clock::now();
  return request;
}

void FillResponseHeader(const Manifest& m, const inference::ModelInferRequest& wire,
                        inference::ModelInferResponse* response) {
  response->set_model_name(m.name);
  response->set_model_version(std::to_string(m.version));
  response->set_id(wire.id());
  *response->mutable_parameters() = wire.parameters();
}

}  // namespace

GrpcFrontend::Reactor* GrpcFrontend::ServerLive(Ctx* ctx, const inference::ServerLiveRequest*,
                                                inference::ServerLiveResponse* response) {
  response->set_live(true);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ServerReady(Ctx* ctx, const inference::ServerReadyRequest*,
                                                 inference::ServerReadyResponse* response) {
  response->set_ready(!draining_);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelReady(Ctx* ctx, const inference::ModelReadyRequest* request,
                                                inference::ModelReadyResponse* response) {
  response->set_ready(models_->Get(request->name(), request->version()).ok());
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ServerMetadata(Ctx* ctx, const inference::ServerMetadataRequest*,
                                                    inference::ServerMetadataResponse* response) {
  FillServerMetadata(response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelMetadata(Ctx* ctx,
                                                   const inference::ModelMetadataRequest* request,
                                                   inference::ModelMetadataResponse* response) {
  auto model = models_->Get(request->name(), request->version());
  if (!model.ok()) return Done(ctx, model.status());
  FillModelMetadata(**model, *models_, response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelConfig(Ctx* ctx, const inference::ModelConfigRequest* request,
                                                 inference::ModelConfigResponse* response) {
  auto model = models_->Get(request->name(), request->version());
  if (!model.ok()) return Done(ctx, model.status());
  FillModelConfig(**model, response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelStatistics(
    Ctx* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  if (!request->name().empty()) {
    auto model = models_->Get(request->name(), request->version());
    if (!model.ok()) return Done(ctx, model.status());
    FillModelStatistics(**model, response->add_model_stats());
  } else {
    for (const auto& model : models_->ReadyModels()) FillModelStatistics(*model, response->add_model_stats());
  }
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryIndex(Ctx* ctx,
                                                     const inference::RepositoryIndexRequest* request,
                                                     inference::RepositoryIndexResponse* response) {
  FillRepositoryIndex(*models_, request->ready(), response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ChangeRepository(Ctx* ctx, const char* verb,
                                                      std::function<Status()> change) {
  if (!options_.explicit_model_control) {
    return Done(ctx, FailedPrecondition(std::string(verb) +
                                        " models on request needs --model-control-mode=explicit"));
  }
  auto* reactor = ctx->DefaultReactor();
  // Loading runs Python in every interpreter for seconds: not on a gRPC thread.
  std::thread([reactor, change = std::move(change)] {
    reactor->Finish(ToGrpcStatus(change()));
  }).detach();
  return reactor;
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryModelLoad(
    Ctx* ctx, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  std::string name = request->model_name();
  return ChangeRepository(ctx, "loading", [this, name] { return models_->Load(name); });
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryModelUnload(
    Ctx* ctx, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  std::string name = request->model_name();
  return ChangeRepository(ctx, "unloading", [this, name] { return models_->Unload(name); });
}

void InferFromWire(ModelManager* models, grpc::CallbackServerContext* ctx,
                   const inference::ModelInferRequest* wire, inference::ModelInferResponse* response,
                   std::function<void(const Status&)> reply) {
  std::shared_ptr<Model> model;
  Status status;
  RequestPtr request = PrepareFromWire(models, *wire, ctx, &model, &status);
  request->reply = std::move(reply);
  if (model == nullptr) {
    request->reply(status);  // no model to count it against
    return;
  }
  const Manifest* m = &model->manifest();  // the model outlives its requests
  request->encode = [m, wire, response](std::vector<Value>& outputs) {
    FillResponseHeader(*m, *wire, response);
    return EncodeOutputs(outputs, *m, *wire, response);
  };
  if (!status.ok()) {
    model->Reject(std::move(request), status);
    return;
  }
  model->Infer(std::move(request));
}

GrpcFrontend::Reactor* GrpcFrontend::ModelInfer(Ctx* ctx, const inference::ModelInferRequest* request,
                                                inference::ModelInferResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  InferFromWire(models_, ctx, request, response,
                [reactor](const Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GrpcFrontend::ModelStreamInfer(Ctx* ctx) {
  return new StreamInferReactor(ctx, models_);
}

}  // namespace manypy
