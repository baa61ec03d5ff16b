// GrpcFrontend: the Open Inference Protocol's GRPCInferenceService as a thin
// stateless shell over InferenceServer: take the call's token and deadline,
// call the core, convert the status once. Thread-safe (callback API: no
// thread per in-flight request, none of its own for repository changes; one
// that starts ModelStreamInfer's writes: see grpc_stream.h).
#pragma once

#include "proto/grpc_service.grpc.pb.h"
#include "server/core/inference_server.h"
#include "server/lifecycle/background_thread.h"

namespace manypy {

class GrpcFrontend final : public inference::GRPCInferenceService::CallbackService {
 public:
  /// `server` must outlive the frontend.
  explicit GrpcFrontend(InferenceServer* server) : server_(server) {}

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
  Reactor* SystemSharedMemoryStatus(Ctx*, const inference::SystemSharedMemoryStatusRequest*,
                                    inference::SystemSharedMemoryStatusResponse*) override;
  Reactor* SystemSharedMemoryRegister(Ctx*, const inference::SystemSharedMemoryRegisterRequest*,
                                      inference::SystemSharedMemoryRegisterResponse*) override;
  Reactor* SystemSharedMemoryUnregister(Ctx*, const inference::SystemSharedMemoryUnregisterRequest*,
                                        inference::SystemSharedMemoryUnregisterResponse*) override;
  Reactor* CudaSharedMemoryStatus(Ctx*, const inference::CudaSharedMemoryStatusRequest*,
                                  inference::CudaSharedMemoryStatusResponse*) override;
  Reactor* CudaSharedMemoryRegister(Ctx*, const inference::CudaSharedMemoryRegisterRequest*,
                                    inference::CudaSharedMemoryRegisterResponse*) override;
  Reactor* CudaSharedMemoryUnregister(Ctx*, const inference::CudaSharedMemoryUnregisterRequest*,
                                      inference::CudaSharedMemoryUnregisterResponse*) override;

 private:
  /// The call's bearer token checked for `scope` (OK when no tokens are set).
  Status Authorize(const Ctx* ctx, AccessScope scope) const;

  InferenceServer* const server_;
  /// Starts the stream calls' writes that a model's worker queued (normal
  /// priority); outlives every call (the server is destroyed first).
  BackgroundThread stream_writes_{"manypy-grpc-wr", 0};
};

}  // namespace manypy
