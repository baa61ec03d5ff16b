// MalformedRequestRefusals: a server interceptor for what gRPC's callback API
// answers badly on its own. A unary request message that protobuf cannot
// parse (malformed bytes, or nested past protobuf's recursion limit of 100
// levels: the whole message is parsed before any handler runs) makes gRPC 1.51
// answer UNIMPLEMENTED with no message, as if the method did not exist. This
// makes it INVALID_ARGUMENT naming the method, why and the limit, and reports
// each such refusal once (the caller counts it as a refused request).
// Thread-safe: one interceptor per call, the factory shared.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/core/inference_server.h"

namespace manypy {

/// gRPC's own limit on nested messages and groups (protobuf's default).
inline constexpr int kProtobufRecursionLimit = 100;

/// `on_refused(method)` runs once per refused call, on gRPC's thread.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> MalformedRequestRefusals(
    std::function<void(const std::string& method)> on_refused);

/// The server's: a refused ModelInfer is counted by `core` as a refused
/// inference request; ServerBuilder takes the list as it is.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
MalformedRequestRefusals(InferenceServer* core);

}  // namespace manypy
