// HttpSession / HttpsSession: one keep-alive HTTP/1.1 connection (Boost.Beast),
// plain or TLS, one request at a time; all its I/O runs on its strand (replies from
// other threads are posted there). Bodies over the limit get 413; a client stalled
// past the timeout (TLS handshake included) is cut off.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

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

/// `Stream` is boost::beast::tcp_stream (plain) or an ssl_stream over one (TLS:
/// Start() shakes hands first). Defined for those two only (http_session.cc).
template <typename Stream>
class BasicHttpSession : public std::enable_shared_from_this<BasicHttpSession<Stream>> {
 public:
  /// `stream` is connected (for TLS, not yet shaken hands); `in_flight` counts
  /// requests read and not yet answered (for shutdown); once `closing` is set
  /// (the frontend stopped accepting) each reply ends its connection.
  BasicHttpSession(Stream stream, HttpRouter* router, HttpSessionLimits limits,
                   std::shared_ptr<std::atomic<int>> in_flight,
                   std::shared_ptr<const std::atomic<bool>> closing)
      : stream_(std::move(stream)),
        router_(router),
        limits_(limits),
        in_flight_(std::move(in_flight)),
        closing_(std::move(closing)) {}

  void Start();
  /// Keeps `slot` (a ConnectionLimiter slot) until the connection ends.
  void HoldWhileOpen(std::shared_ptr<void> slot) { slot_ = std::move(slot); }

 private:
  using Response = boost::beast::http::response<boost::beast::http::string_body>;

  void OnHandshake(boost::beast::error_code ec);
  void Read();
  void OnRead(boost::beast::error_code ec, size_t bytes);
  /// While a request waits for its answer, notices the client closing the
  /// connection and sets `gone` (the request's cancelled() then says so, and a
  /// request still queued is dropped instead of run).
  void WatchForDisconnect(std::shared_ptr<std::atomic<bool>> gone);
  void Reply(HttpResponse response, bool keep_alive, unsigned version);
  /// Reply for server-sent events: the header (chunked), then each event as a
  /// chunk as it comes, then the last chunk and the connection's end.
  void ReplyWithEvents(HttpResponse response, unsigned version);
  void WriteNextEvent();
  /// The events' connection ended (`broke`: a write failed: the client left).
  void EndEvents(bool broke);
  void OnWrite(bool close, boost::beast::error_code ec, size_t bytes);
  void Close();

  Stream stream_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::shared_ptr<Response> response_;  // the write in flight
  std::shared_ptr<HttpEventStream> events_;  // the event stream being written, if any
  std::shared_ptr<std::atomic<bool>> gone_;  // whether the current request's client left
  HttpRouter* const router_;
  const HttpSessionLimits limits_;
  const std::shared_ptr<std::atomic<int>> in_flight_;
  const std::shared_ptr<const std::atomic<bool>> closing_;
  std::shared_ptr<void> slot_;  // released with the session
};

using HttpSession = BasicHttpSession<boost::beast::tcp_stream>;
using HttpsSession = BasicHttpSession<boost::beast::ssl_stream<boost::beast::tcp_stream>>;

}  // namespace manypy
