#include "clients/cpp/tls_options.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace manypy::client {
namespace {

Status ReadFile(const std::string& what, const std::string& path, std::string* out) {
  if (path.empty()) return Status::Ok();
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgument("cannot read the TLS " + what + " " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  *out = text.str();
  if (out->empty()) return InvalidArgument("the TLS " + what + " " + path + " is empty");
  return Status::Ok();
}

}  // namespace

StatusOr<TlsPem> ReadTlsFiles(const TlsOptions& tls) {
  if (tls.cert_file.empty() != tls.key_file.empty()) {
    return InvalidArgument("a TLS client certificate needs its key and the key its certificate: " +
                           std::string(tls.cert_file.empty() ? "the certificate" : "the key") + " is missing");
  }
  TlsPem pem;
  MANYPY_RETURN_IF_ERROR(ReadFile("CA file", tls.ca_file, &pem.ca));
  MANYPY_RETURN_IF_ERROR(ReadFile("client certificate", tls.cert_file, &pem.cert));
  MANYPY_RETURN_IF_ERROR(ReadFile("client key", tls.key_file, &pem.key));
  return pem;
}

}  // namespace manypy::client
