#include "server/grpc/grpc_frontend.h"

#include "server/grpc/grpc_auth.h"
#include "server/grpc/grpc_status.h"
#include "server/grpc/grpc_stream.h"

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

// What the call's connection is, for the core's policies: a loopback peer
// ("ipv4:127.x.x.x:port", "ipv6:[::1]:port", "unix:...") and whether its
// transport is TLS (gRPC's auth context says "ssl").
WireConnection ConnectionOf(const grpc::CallbackServerContext* ctx) {
  WireConnection c;
  const std::string peer = ctx->peer();
  c.loopback = peer.rfind("ipv4:127.", 0) == 0 || peer.rfind("ipv6:[::1]:", 0) == 0 ||
               peer.rfind("ipv6:[::ffff:127.", 0) == 0 || peer.rfind("unix:", 0) == 0;
  auto auth = ctx->auth_context();
  if (auth != nullptr) {
    for (const auto& v : auth->FindPropertyValues("transport_security_type")) {
      c.tls |= std::string(v.data(), v.size()) == "ssl";
    }
  }
  return c;
}

}  // namespace

GrpcFrontend::Reactor* GrpcFrontend::ServerLive(Ctx* ctx, const inference::ServerLiveRequest*,
                                                inference::ServerLiveResponse* response) {
  response->set_live(server_->Live());
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ServerReady(Ctx* ctx, const inference::ServerReadyRequest*,
                                                 inference::ServerReadyResponse* response) {
  response->set_ready(server_->Ready());
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelReady(Ctx* ctx, const inference::ModelReadyRequest* request,
                                                inference::ModelReadyResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  response->set_ready(server_->ModelReady(request->name(), request->version()).ok());
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ServerMetadata(Ctx* ctx, const inference::ServerMetadataRequest*,
                                                    inference::ServerMetadataResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  server_->ServerMetadata(response);
  return Done(ctx, grpc::Status::OK);
}

GrpcFrontend::Reactor* GrpcFrontend::ModelMetadata(Ctx* ctx,
                                                   const inference::ModelMetadataRequest* request,
                                                   inference::ModelMetadataResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->ModelMetadata(request->name(), request->version(), response));
}

GrpcFrontend::Reactor* GrpcFrontend::ModelConfig(Ctx* ctx, const inference::ModelConfigRequest* request,
                                                 inference::ModelConfigResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->ModelConfig(request->name(), request->version(), response));
}

GrpcFrontend::Reactor* GrpcFrontend::ModelStatistics(
    Ctx* ctx, const inference::ModelStatisticsRequest* request,
    inference::ModelStatisticsResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->ModelStatistics(request->name(), request->version(), response));
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryIndex(Ctx* ctx,
                                                     const inference::RepositoryIndexRequest* request,
                                                     inference::RepositoryIndexResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kManagement); !denied.ok()) return Done(ctx, denied);
  server_->RepositoryIndex(request->ready(), response);
  return Done(ctx, grpc::Status::OK);
}

Status GrpcFrontend::Authorize(const Ctx* ctx, AccessScope scope) const {
  return server_->Authorize(AuthorizationOf(*ctx), scope);
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryModelLoad(
    Ctx* ctx, const inference::RepositoryModelLoadRequest* request,
    inference::RepositoryModelLoadResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kManagement); !denied.ok()) return Done(ctx, denied);
  std::vector<std::string> parameters;
  for (const auto& p : request->parameters()) parameters.push_back(p.first);
  auto* reactor = ctx->DefaultReactor();
  server_->LoadModel(request->model_name(), parameters,
                     [reactor](const Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

GrpcFrontend::Reactor* GrpcFrontend::RepositoryModelUnload(
    Ctx* ctx, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kManagement); !denied.ok()) return Done(ctx, denied);
  auto* reactor = ctx->DefaultReactor();
  server_->UnloadModel(request->model_name(),
                       [reactor](const Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

// The client's W3C trace context (gRPC metadata) and the request span's
// attributes, in OpenTelemetry's rpc.* conventions.
static TraceParent TraceOf(const grpc::CallbackServerContext& ctx, bool streams) {
  TraceParent trace;
  const auto& metadata = ctx.client_metadata();
  if (auto it = metadata.find("traceparent"); it != metadata.end()) {
    trace.traceparent.assign(it->second.data(), it->second.size());
    if (auto state = metadata.find("tracestate"); state != metadata.end()) {
      trace.tracestate.assign(state->second.data(), state->second.size());
    }
  }
  trace.attributes = {{"rpc.system", std::string("grpc")},
                      {"rpc.service", std::string("inference.GRPCInferenceService")},
                      {"rpc.method", std::string(streams ? "ModelStreamInfer" : "ModelInfer")}};
  return trace;
}

void InferFromWire(InferenceServer* server, grpc::CallbackServerContext* ctx,
                   const inference::ModelInferRequest* wire, inference::ModelInferResponse* response,
                   std::function<void(const Status&)> reply, std::shared_ptr<WireStream> stream) {
  WireCallOptions options;
  // A unary call may run on this callback thread (run to completion); a
  // stream's requests keep to the workers.
  options.run_here_if_idle = stream == nullptr;
  options.deadline = SteadyDeadline(ctx);
  options.cancelled = [ctx] { return ctx->IsCancelled(); };
  options.stream = std::move(stream);
  options.connection = ConnectionOf(ctx);
  if (GetRequestTracer() != nullptr) options.trace = TraceOf(*ctx, options.stream != nullptr);
  server->Infer(wire, response, std::move(options), std::move(reply));
}

GrpcFrontend::Reactor* GrpcFrontend::ModelInfer(Ctx* ctx, const inference::ModelInferRequest* request,
                                                inference::ModelInferResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  auto* reactor = ctx->DefaultReactor();
  InferFromWire(server_, ctx, request, response,
                [reactor](const Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
GrpcFrontend::ModelStreamInfer(Ctx* ctx) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) {
    return new RefusedStreamReactor(ToGrpcStatus(denied));
  }
  return new StreamInferReactor(ctx, server_, &stream_writes_);
}

GrpcFrontend::Reactor* GrpcFrontend::SystemSharedMemoryStatus(
    Ctx* ctx, const inference::SystemSharedMemoryStatusRequest* request,
    inference::SystemSharedMemoryStatusResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->SystemSharedMemoryStatus(ConnectionOf(ctx), request->name(), response));
}

GrpcFrontend::Reactor* GrpcFrontend::SystemSharedMemoryRegister(
    Ctx* ctx, const inference::SystemSharedMemoryRegisterRequest* request,
    inference::SystemSharedMemoryRegisterResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->SystemSharedMemoryRegister(ConnectionOf(ctx), *request));
}

GrpcFrontend::Reactor* GrpcFrontend::SystemSharedMemoryUnregister(
    Ctx* ctx, const inference::SystemSharedMemoryUnregisterRequest* request,
    inference::SystemSharedMemoryUnregisterResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->SystemSharedMemoryUnregister(ConnectionOf(ctx), request->name()));
}

GrpcFrontend::Reactor* GrpcFrontend::CudaSharedMemoryStatus(
    Ctx* ctx, const inference::CudaSharedMemoryStatusRequest* request,
    inference::CudaSharedMemoryStatusResponse* response) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->CudaSharedMemoryStatus(ConnectionOf(ctx), request->name(), response));
}

GrpcFrontend::Reactor* GrpcFrontend::CudaSharedMemoryRegister(
    Ctx* ctx, const inference::CudaSharedMemoryRegisterRequest* request,
    inference::CudaSharedMemoryRegisterResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->CudaSharedMemoryRegister(ConnectionOf(ctx), *request));
}

GrpcFrontend::Reactor* GrpcFrontend::CudaSharedMemoryUnregister(
    Ctx* ctx, const inference::CudaSharedMemoryUnregisterRequest* request,
    inference::CudaSharedMemoryUnregisterResponse*) {
  if (Status denied = Authorize(ctx, AccessScope::kInference); !denied.ok()) return Done(ctx, denied);
  return Done(ctx, server_->CudaSharedMemoryUnregister(ConnectionOf(ctx), request->name()));
}

}  // namespace manypy
