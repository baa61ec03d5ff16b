// HttpSession: one keep-alive HTTP/1.1 connection (Boost.Beast), one request at
// a time; all its I/O runs on its strand (replies from other threads are posted
// there). Bodies over the limit get 413; a client stalled past the timeout is cut off.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>

#include "server/http/http_router.h"

namespace manypy {

struct HttpSessionLimits {
  uint64_t max_body_bytes = 64 << 20;
  std::chrono::seconds read_timeout{30};
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  /// `in_flight` counts requests read and not yet answered (for shutdown).
  HttpSession(boost::asio::ip::tcp::socket socket, HttpRouter* router, HttpSessionLimits limits,
              std::shared_ptr<std::atomic<int>> in_flight)
      : stream_(std::move(socket)), router_(router), limits_(limits), in_flight_(std::move(in_flight)) {}

  void Start();

 private:
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  void Read();
  void OnRead(boost::beast::error_code ec, size_t bytes);
  void Reply(HttpResponse response, bool keep_alive, unsigned version);
  void OnWrite(bool close, boost::beast::error_code ec, size_t bytes);
  void Close();

  boost::beast::tcp_stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<Response> response_;  // the write in flight
  HttpRouter* const router_;
  const HttpSessionLimits limits_;
  const std::shared_ptr<std::atomic<int>> in_flight_;
};

}  // namespace manypy
