// TlsCredentials: the server's certificate chain, private key and optional client
// CA, read from PEM files and checked with OpenSSL before anything listens.
// A plain value; thread-safe once loaded. Knows no protocol (gRPC and HTTP use it).
#pragma once

#include <string>

#include "common/status.h"

namespace manypy {

struct TlsCredentials {
  std::string certificate_chain;  ///< PEM: the server's certificate, then intermediates
  std::string private_key;        ///< PEM, unencrypted
  std::string client_ca;          ///< PEM; empty: clients need no certificate

  bool require_client_certificates() const { return !client_ca.empty(); }

  /// Reads and checks --tls-cert, --tls-key and (optional) --tls-client-ca.
  /// INVALID_ARGUMENT naming the flag, the file and the problem when only one of
  /// cert/key is given, a client CA comes without them, a file is missing or
  /// unreadable, holds no PEM certificate/key, the certificate has expired, or the
  /// key does not match the certificate. Key material is never in a message.
  static StatusOr<TlsCredentials> Load(const std::string& cert_file, const std::string& key_file,
                                       const std::string& client_ca_file);
};

}  // namespace manypy
