#include "server/grpc/grpc_frontend.h"

#include <thread>

#include "server/grpc/grpc_status.h"
#include "server/grpc/grpc_stream.h"
#include "server/grpc/protocol_metadata.h"
#include "server/models/wire_infer.h"

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
  WireCallOptions options;
  options.deadline = SteadyDeadline(ctx);
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  InferWire(models, wire, response, std::move(options), std::move(reply));
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
