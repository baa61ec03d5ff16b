#include "server/grpc/grpc_frontend.h"

#include <thread>

#include "server/grpc/grpc_auth.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/grpc_stream.h"
#include "server/grpc/protocol_metadata.h"
#include "server/models/load_request.h"
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
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  response->set_ready(models_->Get(request->name(), request->version()).ok());
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ServerMetadata(Ctx* ctx, const inference::ServerMetadataRequest*,
                                                    inference::ServerMetadataResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  FillServerMetadata(response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelMetadata(Ctx* ctx,
                                                   const inference::ModelMetadataRequest* request,
                                                   inference::ModelMetadataResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  auto model = models_->Get(request->name(), request->version());
  if (!model.ok()) return Done(ctx, model.status());
  FillModelMetadata(**model, *models_, response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelConfig(Ctx* ctx, const inference::ModelConfigRequest* request,
                                                 inference::ModelConfigResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  auto model = models_->Get(request->name(), request->version());
  if (!model.ok()) return Done(ctx, model.status());
  FillModelConfig(**model, response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelStatistics(
    Ctx* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
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
  if (Status denied = Authorize(ctx, AccessScope::kManagement); !denied.ok()) return Done(ctx, denied);
  FillRepositoryIndex(*models_, request->ready(), response);
  return Done(ctx, grpc::Status::OK);
}

Status GrpcFrontend::Authorize(const Ctx* ctx, AccessScope scope) const {
  return AuthorizeCall(options_.tokens, *ctx, scope);
}

GrpcFrontend::Reactor* GrpcFrontend::ChangeRepository(Ctx* ctx, const char* verb,
                                                      std::function<Status()> change) {
  if (!options_.explicit_model_control) {
    // UNAVAILABLE, as Triton answers outside its explicit model control mode.
    return Done(ctx, Unavailable(std::string(verb) +
                                 " models on request is off: it needs --model-control-mode=explicit"));
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
  if (Status denied = Authorize(ctx, AccessScope::kManagement); !denied.ok()) return Done(ctx, denied);
  std::vector<std::string> parameters;
  for (const auto& p : request->parameters()) parameters.push_back(p.first);
  if (Status refused = CheckLoadParameters(parameters); !refused.ok()) return Done(ctx, refused);
  std::string name = request->model_name();
  return ChangeRepository(ctx, "loading", [this, name] { return models_->Load(name); });
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryModelUnload(
    Ctx* ctx, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kManagement); !denied.ok()) return Done(ctx, denied);
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
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  auto* reactor = ctx->DefaultReactor();
  InferFromWire(models_, ctx, request, response,
                [reactor](const Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GrpcFrontend::ModelStreamInfer(Ctx* ctx) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) {
    return new RefusedStreamReactor(ToGrpcStatus(denied));
  }
  return new StreamInferReactor(ctx, models_);
}

}  // namespace manypy
