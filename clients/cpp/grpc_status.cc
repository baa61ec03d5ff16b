#include "clients/cpp/grpc_status.h"

#include <cstring>
#include <string>

namespace manypy::client {

const char* GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::UNKNOWN: return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED: return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS: return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED: return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE: return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS: return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

Status FromGrpcStatus(const grpc::Status& s) {
  StatusCode code = StatusCode::kInternal;
  switch (s.error_code()) {
    case grpc::StatusCode::OK: return Status::Ok();
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE: code = StatusCode::kInvalidArgument; break;
    case grpc::StatusCode::DEADLINE_EXCEEDED: code = StatusCode::kDeadlineExceeded; break;
    case grpc::StatusCode::NOT_FOUND: code = StatusCode::kNotFound; break;
    case grpc::StatusCode::ALREADY_EXISTS: code = StatusCode::kAlreadyExists; break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: code = StatusCode::kResourceExhausted; break;
    case grpc::StatusCode::PERMISSION_DENIED: code = StatusCode::kPermissionDenied; break;
    case grpc::StatusCode::UNAUTHENTICATED: code = StatusCode::kUnauthenticated; break;
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::UNIMPLEMENTED: code = StatusCode::kFailedPrecondition; break;
    // Both are worth retrying, as UNAVAILABLE is.
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::UNAVAILABLE: code = StatusCode::kUnavailable; break;
    default: code = StatusCode::kInternal; break;  // INTERNAL, UNKNOWN, DATA_LOSS
  }
  const char* grpc_name = GrpcCodeName(s.error_code());
  if (strcmp(grpc_name, StatusCodeName(code)) == 0) return Status(code, s.error_message());
  return Status(code, std::string(grpc_name) + ": " + s.error_message());
}

Status StatusFromStreamMessage(const std::string& text) {
  size_t colon = text.find(": ");
  if (colon != std::string::npos) {
    std::string name = text.substr(0, colon);
    for (int c = 0; c <= static_cast<int>(grpc::StatusCode::UNAUTHENTICATED); ++c) {
      auto code = static_cast<grpc::StatusCode>(c);
      if (name == GrpcCodeName(code) && code != grpc::StatusCode::OK) {
        return FromGrpcStatus(grpc::Status(code, text.substr(colon + 2)));
      }
    }
  }
  return Status(StatusCode::kInternal, text);
}

}  // namespace manypy::client
