#include "server/http/http_tls.h"

#include <openssl/ssl.h>

namespace manypy {

namespace ssl = boost::asio::ssl;

StatusOr<std::unique_ptr<ssl::context>> MakeHttpTlsContext(const TlsCredentials& tls) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 |
                           ssl::context::single_dh_use,
                       ec);
  if (ec) return InvalidArgument("HTTP TLS: cannot set the protocol options: " + ec.message());
  // Belt and braces beside the no_tlsv1* options: the floor OpenSSL enforces.
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  context->use_certificate_chain(boost::asio::buffer(tls.certificate_chain), ec);
  if (ec) return InvalidArgument("HTTP TLS: OpenSSL refused the --tls-cert chain: " + ec.message());
  context->use_private_key(boost::asio::buffer(tls.private_key), ssl::context::pem, ec);
  if (ec) return InvalidArgument("HTTP TLS: OpenSSL refused the --tls-key key: " + ec.message());
  if (tls.require_client_certificates()) {
    context->add_certificate_authority(boost::asio::buffer(tls.client_ca), ec);
    if (ec) return InvalidArgument("HTTP TLS: OpenSSL refused the --tls-client-ca: " + ec.message());
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
    if (ec) return InvalidArgument("HTTP TLS: cannot require client certificates: " + ec.message());
  }
  return context;
}

}  // namespace manypy
