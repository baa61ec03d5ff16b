// HttpConnection: a minimal synchronous HTTP/1.1 keep-alive client (Boost.Beast)
// for end-to-end tests, plus raw-socket helpers for malformed requests. One
// connection per object; not thread-safe.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <string>

namespace manypy::testing {

struct HttpReply {
  int status = 0;
  std::string body;
  std::string inference_header;  ///< Inference-Header-Content-Length, if any
  bool keep_alive = false;
};

class HttpConnection {
 public:
  explicit HttpConnection(int port, const std::string& address = "127.0.0.1") : socket_(io_) {
    boost::asio::ip::tcp::endpoint ep(boost::asio::ip::make_address(address),
                                      static_cast<unsigned short>(port));
    socket_.connect(ep);
  }

  /// Sends one request and reads its reply; status 0 when the connection broke.
  HttpReply Send(const std::string& method, const std::string& target, const std::string& body = "",
                 const std::string& inference_header = "") {
    namespace http = boost::beast::http;
    http::request<http::string_body> req(http::string_to_verb(method), target, 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    if (!inference_header.empty()) req.set("Inference-Header-Content-Length", inference_header);
    req.body() = body;
    req.prepare_payload();
    HttpReply reply;
    boost::beast::error_code ec;
    http::write(socket_, req, ec);
    if (ec) return reply;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1ull << 31);
    http::read(socket_, buffer_, parser, ec);
    if (ec) return reply;
    auto& res = parser.get();
    reply.status = res.result_int();
    reply.body = res.body();
    reply.keep_alive = res.keep_alive();
    auto it = res.find("Inference-Header-Content-Length");
    if (it != res.end()) reply.inference_header = std::string(it->value());
    return reply;
  }

  /// Writes bytes as they are (for malformed requests).
  void WriteRaw(const std::string& bytes) { boost::asio::write(socket_, boost::asio::buffer(bytes)); }

  /// Reads until the server closes the connection; what it sent.
  std::string ReadAll() {
    std::string out;
    char buf[4096];
    boost::system::error_code ec;
    for (;;) {
      size_t n = socket_.read_some(boost::asio::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }

 private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket socket_;
  boost::beast::flat_buffer buffer_;
};

}  // namespace manypy::testing
