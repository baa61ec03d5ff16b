// HttpsConnection: a minimal synchronous HTTP/1.1-over-TLS client (Boost.Beast,
// OpenSSL) for end-to-end tests: verifies the server with a CA file, optionally
// presents a client certificate. One connection per object; not thread-safe.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <string>

#include "tests/test_util/http_client.h"

namespace manypy::testing {

class HttpsConnection {
 public:
  /// Connects to 127.0.0.1:`port` and shakes hands; handshake_error() says how
  /// that went. `cert_file`/`key_file` empty: no client certificate.
  HttpsConnection(int port, const std::string& ca_file, const std::string& cert_file = "",
                  const std::string& key_file = "")
      : context_(MakeContext(ca_file, cert_file, key_file)), stream_(io_, context_) {
    namespace ssl = boost::asio::ssl;
    stream_.set_verify_callback(ssl::host_name_verification("127.0.0.1"));
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"),
                                      static_cast<unsigned short>(port));
    stream_.next_layer().connect(ep);
    stream_.handshake(ssl::stream_base::client, handshake_error_);
  }

  /// Empty when the handshake succeeded (the server was verified; with TLS 1.3
  /// a refused client certificate shows on the first read instead).
  const boost::system::error_code& handshake_error() const { return handshake_error_; }

  /// Sends one request and reads its reply; status 0 when the connection broke.
  HttpReply Send(const std::string& method, const std::string& target, const std::string& body = "") {
    namespace http = boost::beast::http;
    HttpReply reply;
    if (handshake_error_) return reply;
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    boost::beast::error_code ec;
    http::write(stream_, req, ec);
    if (ec) return reply;
    http::response_parser<http::string_body> parser;
    http::read(stream_, buffer_, parser, ec);
    if (ec) return reply;
    reply.status = parser.get().result_int();
    reply.body = parser.get().body();
    reply.keep_alive = parser.get().keep_alive();
    return reply;
  }

 private:
  // Complete before the stream exists: OpenSSL copies a context's certificate
  // into each connection when the connection is made.
  static boost::asio::ssl::context MakeContext(const std::string& ca_file, const std::string& cert_file,
                                               const std::string& key_file) {
    namespace ssl = boost::asio::ssl;
    ssl::context context(ssl::context::tls_client);
    context.load_verify_file(ca_file);
    context.set_verify_mode(ssl::verify_peer);
    if (!cert_file.empty()) {
      context.use_certificate_chain_file(cert_file);
      context.use_private_key_file(key_file, ssl::context::pem);
    }
    return context;
  }

  boost::asio::io_context io_;
  boost::asio::ssl::context context_;
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream_;
  boost::beast::flat_buffer buffer_;
  boost::system::error_code handshake_error_;
};

}  // namespace manypy::testing
