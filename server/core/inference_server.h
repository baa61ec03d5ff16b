// InferenceServer: the one contract every frontend calls (gRPC, HTTP), in the
// Open Inference Protocol's own messages: infer, repository changes, metadata,
// config, statistics, index, readiness, drain. Thread-safe; no locks of its
// own (the model manager's and the dispatcher's guard the state it reads).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "proto/grpc_service.pb.h"
#include "server/auth/access_tokens.h"
#include "server/core/client_shared_memory.h"
#include "server/core/wire_infer.h"
#include "server/lifecycle/model_manager.h"

namespace manypy {

class InferenceServer {
 public:
  struct Options {
    /// Whether clients may load and unload models (--model-control-mode=explicit or on-demand).
    bool explicit_model_control = false;
    AccessTokens tokens;  ///< none: every call is open
    ClientSharedMemory::Options shared_memory;  ///< off by default
  };
  /// `models` and `dispatcher` must outlive the server, and the server its frontends.
  InferenceServer(ModelManager* models, Dispatcher* dispatcher, Options options)
      : models_(models),
        dispatcher_(dispatcher),
        options_(std::move(options)),
        shared_memory_(options_.shared_memory) {}

  /// Whether a caller presenting `authorization` (an HTTP Authorization
  /// header's value, or gRPC's `authorization` metadata; empty if none) may
  /// make a call of `scope`: OK, UNAUTHENTICATED or PERMISSION_DENIED.
  Status Authorize(std::string_view authorization, AccessScope scope) const {
    return options_.tokens.Authorize(authorization, scope);
  }

  /// Health: live while the process runs; ready until StartDraining.
  bool Live() const { return true; }
  bool Ready() const { return !draining_; }
  /// Shutdown has begun: Ready answers false while in-flight work drains.
  void StartDraining() { draining_ = true; }
  /// Shutdown: StartDraining, then new requests are refused and those queued
  /// or running may finish until `deadline`; what is left then is answered
  /// UNAVAILABLE. Returns how many calls were still running (stuck in native
  /// code: the process should exit without unloading).
  size_t Drain(Clock::time_point deadline);

  /// Prepare -> Schedule -> Execute -> Finish for `wire`: `reply` is called
  /// once with the final status after `response` has been filled (header and
  /// outputs, when OK), from a dispatcher worker, or from this thread when the
  /// request fails early. `wire` and `response` must live until then.
  void Infer(const inference::ModelInferRequest* wire, inference::ModelInferResponse* response,
             WireCallOptions call, std::function<void(const Status&)> reply) {
    InferWire(models_, &shared_memory_, wire, response, std::move(call), std::move(reply));
  }
  /// Answers an inference request for `model` (`version`) that its frontend
  /// could not decode with `status`, counted once like every other refusal.
  void Refuse(const std::string& model, const std::string& version, const Status& status,
              std::function<void(const Status&)> reply) {
    RefuseWire(models_, model, version, status, std::move(reply));
  }

  /// Repository changes, asynchronous: `done` is called once, from the model
  /// manager's repository thread, or from this thread when the request is
  /// refused (not in explicit mode: UNAVAILABLE, as Triton answers; a load
  /// parameter: INVALID_ARGUMENT). `parameters` names the load request's
  /// parameters, which manypy refuses (see load_request.h).
  void LoadModel(const std::string& name, const std::vector<std::string>& parameters,
                 std::function<void(const Status&)> done) const;
  void UnloadModel(const std::string& name, std::function<void(const Status&)> done) const;

  /// OK when `name` (`version`) serves; else why not (NOT_FOUND, UNAVAILABLE).
  Status ModelReady(const std::string& name, const std::string& version) const;
  void ServerMetadata(inference::ServerMetadataResponse* response) const;
  Status ModelMetadata(const std::string& name, const std::string& version,
                       inference::ModelMetadataResponse* response) const;
  Status ModelConfig(const std::string& name, const std::string& version,
                     inference::ModelConfigResponse* response) const;
  /// One model's statistics, or (`name` empty) every ready model's.
  Status ModelStatistics(const std::string& name, const std::string& version,
                         inference::ModelStatisticsResponse* response) const;
  void RepositoryIndex(bool ready_only, inference::RepositoryIndexResponse* response) const;
  /// `name`'s OpenAI declaration (docs/text-generation.md) and metadata, from
  /// its serving version's manifest (on-demand: the newest archive's, without
  /// loading it); NOT_FOUND as ModelMetadata.
  Status OpenAiModel(const std::string& name, OpenAiSpec* spec,
                     inference::ModelMetadataResponse* metadata) const;
  /// The models declared for at least one OpenAI route that could serve now
  /// (ready, or loaded on request in on-demand mode), sorted by name.
  std::vector<std::string> OpenAiModels() const;

  /// The shared-memory extension, for a call on `connection`: every call is
  /// first checked against the policy (PERMISSION_DENIED: off, or not from
  /// this host; see ClientSharedMemory). System regions: status (NOT_FOUND
  /// for an unknown name), register (ALREADY_EXISTS, INVALID_ARGUMENT),
  /// unregister (an unknown name is no error). CUDA regions: none is ever
  /// registered; register is FAILED_PRECONDITION, saying why.
  Status SystemSharedMemoryStatus(const WireConnection& connection, const std::string& name,
                                  inference::SystemSharedMemoryStatusResponse* response) const;
  Status SystemSharedMemoryRegister(const WireConnection& connection,
                                    const inference::SystemSharedMemoryRegisterRequest& request);
  Status SystemSharedMemoryUnregister(const WireConnection& connection, const std::string& name);
  Status CudaSharedMemoryStatus(const WireConnection& connection, const std::string& name,
                                inference::CudaSharedMemoryStatusResponse* response) const;
  Status CudaSharedMemoryRegister(const WireConnection& connection,
                                  const inference::CudaSharedMemoryRegisterRequest& request) const;
  Status CudaSharedMemoryUnregister(const WireConnection& connection, const std::string& name) const;

 private:
  /// OK in explicit model control mode; else UNAVAILABLE naming `verb`.
  Status RepositoryChangesAllowed(const char* verb) const;

  ModelManager* const models_;
  Dispatcher* const dispatcher_;
  const Options options_;
  ClientSharedMemory shared_memory_;
  std::atomic<bool> draining_{false};
};

}  // namespace manypy
