// TlsOptions: how a client reaches a TLS server: the CA that verifies it and an
// optional client certificate (mutual TLS). A plain value; the PEM reader is
// thread-safe. Shared by the gRPC client and manypy-perf's HTTP sender.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy::client {

struct TlsOptions {
  bool enabled = false;   ///< implied by any file below; plain text otherwise
  std::string ca_file;    ///< PEM roots that verify the server; empty: the system's
  std::string cert_file;  ///< PEM client certificate, with key_file (mutual TLS)
  std::string key_file;   ///< PEM private key of cert_file

  bool on() const { return enabled || !ca_file.empty() || !cert_file.empty() || !key_file.empty(); }
};

/// The PEM contents of the three files (empty where no file is set).
struct TlsPem {
  std::string ca;
  std::string cert;
  std::string key;
};

/// INVALID_ARGUMENT naming the file when one cannot be read or is empty, or
/// when only one of cert_file / key_file is set.
StatusOr<TlsPem> ReadTlsFiles(const TlsOptions& tls);

}  // namespace manypy::client
