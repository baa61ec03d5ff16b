// Converts a grpc::Status from the server into a manypy::Status, once, for
// every call of the client. Pure function; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace manypy::client {

/// The gRPC name of a code ("UNAVAILABLE", "CANCELLED", ...).
const char* GrpcCodeName(grpc::StatusCode code);

/// Maps the gRPC code to the nearest manypy::StatusCode and keeps the server's
/// message. Where the two names differ (UNKNOWN -> INTERNAL, CANCELLED ->
/// UNAVAILABLE, ...) the message is prefixed with the original name: "UNKNOWN: ...".
Status FromGrpcStatus(const grpc::Status& status);

/// The status in a ModelStreamInferResponse's error_message, which servers
/// write as "CODE: message" (manypy and Triton alike); INTERNAL with the
/// whole text when it names no code.
Status StatusFromStreamMessage(const std::string& text);

}  // namespace manypy::client
