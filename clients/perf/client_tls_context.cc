#include "clients/perf/client_tls_context.h"

#include <openssl/ssl.h>

namespace manypy::perf {

namespace ssl = boost::asio::ssl;

StatusOr<std::shared_ptr<ssl::context>> MakeClientTlsContext(const client::TlsOptions& tls) {
  auto pem = client::ReadTlsFiles(tls);
  if (!pem.ok()) return pem.status();
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  boost::system::error_code ec;
  if (pem->ca.empty()) {
    context->set_default_verify_paths(ec);
  } else {
    context->add_certificate_authority(boost::asio::buffer(pem->ca), ec);
  }
  if (ec) return InvalidArgument("TLS CA " + tls.ca_file + ": " + ec.message());
  context->set_verify_mode(ssl::verify_peer);
  if (!pem->cert.empty()) {
    context->use_certificate_chain(boost::asio::buffer(pem->cert), ec);
    if (ec) return InvalidArgument("TLS client certificate " + tls.cert_file + ": " + ec.message());
    context->use_private_key(boost::asio::buffer(pem->key), ssl::context::pem, ec);
    if (ec) return InvalidArgument("TLS client key " + tls.key_file + ": " + ec.message());
  }
  return context;
}

}  // namespace manypy::perf
