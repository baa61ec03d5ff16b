// Bearer tokens over gRPC: the call's `authorization` metadata, and the stream
// reactor that refuses a call without the right one. Stateless; thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include "proto/grpc_service.grpc.pb.h"
#include <string_view>


namespace manypy {

/// The call's `authorization` metadata (empty if none): what the core's
/// InferenceServer::Authorize checks.
std::string_view AuthorizationOf(const grpc::CallbackServerContext& ctx);

/// A ModelStreamInfer call refused before its first read: it only finishes with
/// `status`, and deletes itself when gRPC is done with it.
class RefusedStreamReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest,
                                     inference::ModelStreamInferResponse> {
 public:
  explicit RefusedStreamReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace manypy
