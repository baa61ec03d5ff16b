// The gRPC listening port's credentials: TLS from TlsCredentials (client
// certificates required and verified when a client CA is set), or plain text.
// Stateless; thread-safe.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "server/tls/tls_credentials.h"

namespace manypy {

/// `tls` null: plain text. TLS 1.2 is the oldest version gRPC's SSL credentials
/// accept (grpc core's default minimum), so nothing older is negotiated.
std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsCredentials* tls);

}  // namespace manypy
