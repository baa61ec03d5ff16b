#include "server/grpc/grpc_tls.h"

#include <grpcpp/security/server_credentials.h>

namespace manypy {

std::shared_ptr<grpc::ServerCredentials> GrpcServerCredentials(const TlsCredentials* tls) {
  if (tls == nullptr) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options(
      tls->require_client_certificates() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  options.pem_root_certs = tls->client_ca;
  options.pem_key_cert_pairs.push_back({tls->private_key, tls->certificate_chain});
  return grpc::SslServerCredentials(options);
}

}  // namespace manypy
