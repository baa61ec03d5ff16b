// Bearer-token checks for gRPC calls: reads the call's `authorization` metadata
// and asks AccessTokens. Stateless; thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include "proto/grpc_service.grpc.pb.h"
#include "server/auth/access_tokens.h"

namespace manypy {

/// OK, UNAUTHENTICATED or PERMISSION_DENIED for a call of `scope`.
Status AuthorizeCall(const AccessTokens& tokens, const grpc::CallbackServerContext& ctx,
                     AccessScope scope);

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
