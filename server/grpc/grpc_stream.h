// StreamInferReactor: one ModelStreamInfer call. Reads requests as they come,
// prepares each on the gRPC thread and hands it to its model's scheduler,
// and writes one ModelStreamInferResponse per request as each finishes
// (errors in error_message; the stream stays open). Writes are serialized;
// the reactor deletes itself when gRPC is done with it.
#pragma once

#include <deque>
#include <functional>
#include <mutex>

#include "proto/grpc_service.grpc.pb.h"
#include "server/core/inference_server.h"

namespace manypy {

/// Prepare -> Schedule for one wire request; `reply` is called once with the
/// final status after `response` has been filled (from any thread).
void InferFromWire(InferenceServer* server, grpc::CallbackServerContext* ctx,
                   const inference::ModelInferRequest* wire, inference::ModelInferResponse* response,
                   std::function<void(const Status&)> reply);

class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  StreamInferReactor(grpc::CallbackServerContext* ctx, InferenceServer* server);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  void Enqueue(inference::ModelStreamInferResponse response);
  void MaybeFinishLocked();  // REQUIRES: mu_

  grpc::CallbackServerContext* const ctx_;
  InferenceServer* const server_;
  inference::ModelInferRequest incoming_;  // owned by the read in flight

  std::mutex mu_;
  std::deque<inference::ModelStreamInferResponse> outbox_;  // guarded by mu_; front() is being written
  bool writing_ = false;       // guarded by mu_
  bool reads_done_ = false;    // guarded by mu_
  int running_ = 0;            // guarded by mu_: requests not yet answered
  bool finished_ = false;      // guarded by mu_
};

}  // namespace manypy
