// GrpcFrontend: the Open Inference Protocol's GRPCInferenceService as a thin
// stateless shell: get a model handle, Prepare, hand the request to the
// model's scheduler, encode and convert the status once when it finishes.
// Thread-safe (callback API: no thread per in-flight request).
#pragma once

#include <atomic>
#include <functional>

#include "proto/grpc_service.grpc.pb.h"
#include "server/auth/access_tokens.h"
#include "server/models/model_manager.h"

namespace manypy {

class GrpcFrontend final : public inference::GRPCInferenceService::CallbackService {
 public:
  struct Options {
    bool explicit_model_control = false;
    AccessTokens tokens;  ///< none: every call is open
  };
  GrpcFrontend(ModelManager* models, Options options) : models_(models), options_(options) {}

  /// After this, ServerReady answers false (while in-flight work drains).
  void StartDraining() { draining_ = true; }

  using Reactor = grpc::ServerUnaryReactor;
  using Ctx = grpc::CallbackServerContext;
  Reactor* ServerLive(Ctx*, const inference::ServerLiveRequest*, inference::ServerLiveResponse*) override;
  Reactor* ServerReady(Ctx*, const inference::ServerReadyRequest*, inference::ServerReadyResponse*) override;
  Reactor* ModelReady(Ctx*, const inference::ModelReadyRequest*, inference::ModelReadyResponse*) override;
  Reactor* ServerMetadata(Ctx*, const inference::ServerMetadataRequest*,
                          inference::ServerMetadataResponse*) override;
  Reactor* ModelMetadata(Ctx*, const inference::ModelMetadataRequest*,
                         inference::ModelMetadataResponse*) override;
  Reactor* ModelInfer(Ctx*, const inference::ModelInferRequest*, inference::ModelInferResponse*) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
  ModelStreamInfer(Ctx*) override;
  Reactor* ModelConfig(Ctx*, const inference::ModelConfigRequest*, inference::ModelConfigResponse*) override;
  Reactor* ModelStatistics(Ctx*, const inference::ModelStatisticsRequest*,
                           inference::ModelStatisticsResponse*) override;
  Reactor* RepositoryIndex(Ctx*, const inference::RepositoryIndexRequest*,
                           inference::RepositoryIndexResponse*) override;
  Reactor* RepositoryModelLoad(Ctx*, const inference::RepositoryModelLoadRequest*,
                               inference::RepositoryModelLoadResponse*) override;
  Reactor* RepositoryModelUnload(Ctx*, const inference::RepositoryModelUnloadRequest*,
                                 inference::RepositoryModelUnloadResponse*) override;

 private:
  /// Runs a load or unload off the gRPC threads (explicit control mode only).
  Reactor* ChangeRepository(Ctx* ctx, const char* verb, std::function<Status()> change);
  /// The call's bearer token checked for `scope` (OK when no tokens are set).
  Status Authorize(const Ctx* ctx, AccessScope scope) const;

  ModelManager* const models_;
  const Options options_;
  std::atomic<bool> draining_{false};
};

}  // namespace manypy
