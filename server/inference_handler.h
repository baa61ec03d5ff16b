// InferenceHandler: one inference request end to end, independent of the
// transport: find the model, decode, run, encode, count. Thread-safe.
#pragma once

#include <chrono>

#include "common/status.h"
#include "proto/grpc_service.pb.h"
#include "server/model_manager.h"

namespace manypy {

class InferenceHandler {
 public:
  explicit InferenceHandler(ModelManager* models) : models_(models) {}

  /// Runs `request`. `enqueued` is when it was received (for queue-time
  /// statistics). Errors: NOT_FOUND / UNAVAILABLE for the model,
  /// INVALID_ARGUMENT for the inputs, INTERNAL with the Python exception's
  /// type and message when the model raises.
  Status Infer(const inference::ModelInferRequest& request,
               std::chrono::steady_clock::time_point enqueued,
               inference::ModelInferResponse* response) const;

 private:
  ModelManager* const models_;
};

}  // namespace manypy
