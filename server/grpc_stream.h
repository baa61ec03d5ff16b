// StreamInferReactor: one ModelStreamInfer call. Reads requests as they come,
// runs each on the executor, and writes one ModelStreamInferResponse per
// request (errors in error_message, the stream stays open). Writes are
// serialized; the reactor deletes itself when gRPC is done with it.
#pragma once

#include <chrono>
#include <deque>
#include <mutex>

#include "proto/grpc_service.grpc.pb.h"
#include "server/executor.h"
#include "server/inference_handler.h"

namespace manypy {

/// DEADLINE_EXCEEDED if the call was cancelled or its deadline has passed.
Status CheckStillWanted(grpc::CallbackServerContext* ctx);

class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  StreamInferReactor(grpc::CallbackServerContext* ctx, const InferenceHandler* handler,
                     Executor* executor);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  void Run(inference::ModelInferRequest request, std::chrono::steady_clock::time_point received);
  void Enqueue(inference::ModelStreamInferResponse response);
  void MaybeFinishLocked();  // REQUIRES: mu_

  grpc::CallbackServerContext* const ctx_;
  const InferenceHandler* const handler_;
  Executor* const executor_;
  inference::ModelInferRequest incoming_;  // owned by the read in flight

  std::mutex mu_;
  std::deque<inference::ModelStreamInferResponse> outbox_;  // guarded by mu_; front() is being written
  bool writing_ = false;       // guarded by mu_
  bool reads_done_ = false;    // guarded by mu_
  int running_ = 0;            // guarded by mu_: requests on the executor
  bool finished_ = false;      // guarded by mu_
};

}  // namespace manypy
