// The one place a manypy Status becomes a gRPC status. Pure; thread-safe.
#pragma once

#include <grpcpp/support/status.h>

#include "common/status.h"

namespace manypy {

grpc::Status ToGrpcStatus(const Status& status);

}  // namespace manypy
