#include "server/http/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/ssl.hpp>

#include <sys/socket.h>

#include <cerrno>
#include <type_traits>

#include "server/log.h"

namespace manypy {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

namespace {

template <typename Stream>
constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

// The connection ended (or its TLS layer failed) rather than a request being malformed.
bool ConnectionEnded(beast::error_code ec) {
  return ec == http::error::end_of_stream || ec == beast::error::timeout ||
         ec == net::error::operation_aborted || ec == net::error::connection_reset ||
         ec == net::ssl::error::stream_truncated || ec.category() == net::error::get_ssl_category();
}

}  // namespace

template <typename Stream>
void BasicHttpSession<Stream>::Start() {
  if constexpr (kTls<Stream>) {
    // The handshake is bounded like a request: a client that connects and says
    // nothing holds the connection no longer than the read timeout.
    beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
    stream_.async_handshake(net::ssl::stream_base::server,
                            beast::bind_front_handler(&BasicHttpSession::OnHandshake, this->shared_from_this()));
  } else {
    net::dispatch(stream_.get_executor(),
                  beast::bind_front_handler(&BasicHttpSession::Read, this->shared_from_this()));
  }
}

template <typename Stream>
void BasicHttpSession<Stream>::OnHandshake(beast::error_code ec) {
  if (ec) {
    // A plain-text client, a wrong CA on either side, a missing client certificate:
    // the client sees the TLS alert; the server keeps serving.
    if (LogEnabled(LogLevel::kVerbose)) Log(LogLevel::kVerbose, "HTTP: TLS handshake failed: " + ec.message());
    beast::error_code ignored;
    beast::get_lowest_layer(stream_).socket().close(ignored);
    return;
  }
  Read();
}

template <typename Stream>
void BasicHttpSession<Stream>::Read() {
  parser_.emplace();
  parser_->body_limit(limits_.max_body_bytes);
  // Idle keep-alive connections and slow senders alike: the whole request
  // must arrive within the timeout.
  beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&BasicHttpSession::OnRead, this->shared_from_this()));
}

template <typename Stream>
void BasicHttpSession<Stream>::OnRead(beast::error_code ec, size_t) {
  if (ConnectionEnded(ec)) return Close();
  ++*in_flight_;
  if (ec == http::error::body_limit) {
    return Reply(HttpRouter::Error(Status(StatusCode::kResourceExhausted, "the request body exceeds the limit of " +
                                                     std::to_string(limits_.max_body_bytes) +
                                                     " bytes (--max-message-size)"))
                     .WithStatus(413),
                 false, 11);
  }
  if (ec) {
    return Reply(HttpRouter::Error(InvalidArgument("malformed HTTP request: " + ec.message())), false, 11);
  }
  beast::get_lowest_layer(stream_).expires_never();  // the request may wait in a model's queue; no read is pending
  auto& req = parser_->get();
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  auto header = req.find("Inference-Header-Content-Length");
  if (header != req.end()) {
    try {
      request.inference_header_length = std::stoull(std::string(header->value()));
    } catch (const std::exception&) {
      return Reply(HttpRouter::Error(InvalidArgument("Inference-Header-Content-Length is not a number")),
                   false, req.version());
    }
  }
  if (auto auth = req.find(http::field::authorization); auth != req.end()) {
    request.authorization = std::string(auth->value());  // checked by the router; never logged
  }
  if (auto parent = req.find("traceparent"); parent != req.end()) {
    request.traceparent = std::string(parent->value());
    if (auto state = req.find("tracestate"); state != req.end()) {
      request.tracestate = std::string(state->value());
    }
  }
  request.body = std::move(req.body());
  request.connection.tls = kTls<Stream>;
  beast::error_code peer_error;
  auto peer = beast::get_lowest_layer(stream_).socket().remote_endpoint(peer_error);
  if (!peer_error) {
    auto address = peer.address();
    request.connection.loopback =
        address.is_loopback() ||
        (address.is_v6() && address.to_v6().is_v4_mapped() &&
         net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6()).is_loopback());
  }
  auto gone = std::make_shared<std::atomic<bool>>(false);
  gone_ = gone;
  request.cancelled = [gone] { return gone->load(); };
  bool keep_alive = req.keep_alive();
  unsigned version = req.version();
  // The router may answer from a worker thread: the write goes back to this strand.
  router_->Handle(std::move(request),
                  [self = this->shared_from_this(), keep_alive, version](HttpResponse response) {
                    net::post(self->stream_.get_executor(),
                              [self, response = std::move(response), keep_alive, version]() mutable {
                                self->Reply(std::move(response), keep_alive, version);
                              });
                  });
  WatchForDisconnect(std::move(gone));
}

template <typename Stream>
void BasicHttpSession<Stream>::WatchForDisconnect(std::shared_ptr<std::atomic<bool>> gone) {
  // No read is pending while the request waits, so nothing else would see the
  // client leave. Waiting for readability and peeking (on the TCP socket, under
  // any TLS) tells end of stream or reset (gone: as nginx, a half-close counts
  // as leaving) from more bytes (a pipelined request: still there).
  auto on_readable = [self = this->shared_from_this(), gone](beast::error_code ec) {
    if (ec) return;  // cancelled by Reply, or closed
    int fd = beast::get_lowest_layer(self->stream_).socket().native_handle();
    char byte;
    ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) gone->store(true);
  };
  beast::get_lowest_layer(stream_).socket().async_wait(
      net::socket_base::wait_read, net::bind_executor(stream_.get_executor(), std::move(on_readable)));
}

template <typename Stream>
void BasicHttpSession<Stream>::Reply(HttpResponse r, bool keep_alive, unsigned version) {
  if (r.events) return ReplyWithEvents(std::move(r), version);
  response_ = std::make_shared<Response>(static_cast<http::status>(r.status), version);
  response_->set(http::field::server, "manypy");
  response_->set(http::field::content_type, r.content_type);
  if (r.inference_header_length) {
    response_->set("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
  }
  for (const auto& [field, value] : r.headers) response_->set(field, value);
  // A process stepping aside ends each connection with its reply: the
  // client's next request opens a new one, which the new process accepts.
  keep_alive = keep_alive && !closing_->load(std::memory_order_relaxed);
  response_->keep_alive(keep_alive);
  response_->body() = std::move(r.body);
  response_->prepare_payload();
  beast::error_code ignored;
  beast::get_lowest_layer(stream_).socket().cancel(ignored);  // ends WatchForDisconnect's wait
  // A client that stops reading is cut off too.
  beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&BasicHttpSession::OnWrite, this->shared_from_this(), !keep_alive));
}

template <typename Stream>
void BasicHttpSession<Stream>::ReplyWithEvents(HttpResponse r, unsigned version) {
  events_ = std::move(r.events);
  using Header = http::response<http::empty_body>;
  auto header = std::make_shared<Header>(static_cast<http::status>(r.status), version);
  header->set(http::field::server, "manypy");
  header->set(http::field::content_type, "text/event-stream");
  header->set(http::field::cache_control, "no-cache");
  for (const auto& [field, value] : r.headers) header->set(field, value);
  header->chunked(true);
  header->keep_alive(false);  // the stream's end is the connection's
  auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*header);
  // Unlike Reply, the disconnect watch stays: the client may leave while the
  // model computes its next response, when no write would notice.
  beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
  http::async_write_header(stream_, *serializer,
                           [self = this->shared_from_this(), header, serializer](beast::error_code ec, size_t) {
                             if (ec) return self->EndEvents(true);
                             self->WriteNextEvent();
                           });
}

template <typename Stream>
void BasicHttpSession<Stream>::WriteNextEvent() {
  if (!events_) return;  // a wake posted before the stream broke
  HttpEventStream::Event event;
  bool ended = false;
  auto self = this->shared_from_this();
  auto wake = [self] { net::post(self->stream_.get_executor(), [self] { self->WriteNextEvent(); }); };
  if (!events_->Next(&event, &ended, wake)) {
    if (!ended) {
      // Waiting for the model, not for the client: no timeout.
      beast::get_lowest_layer(stream_).expires_never();
      return;
    }
    beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
    net::async_write(stream_, http::make_chunk_last(),
                     [self](beast::error_code ec, size_t) { self->EndEvents(static_cast<bool>(ec)); });
    return;
  }
  auto data = std::make_shared<std::string>(std::move(event.data));
  // A client that stops reading is cut off, as for any response.
  beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
  net::async_write(stream_, http::make_chunk(net::buffer(*data)),
                   [self, data, written = std::move(event.written)](beast::error_code ec, size_t) {
                     if (written) written();
                     if (ec) return self->EndEvents(true);
                     self->WriteNextEvent();
                   });
}

template <typename Stream>
void BasicHttpSession<Stream>::EndEvents(bool broke) {
  if (broke) {
    if (gone_) gone_->store(true);  // the request's stream ends at its next response
    events_->Abandon();
  }
  events_.reset();
  --*in_flight_;
  Close();
}

template <typename Stream>
void BasicHttpSession<Stream>::OnWrite(bool close, beast::error_code ec, size_t) {
  --*in_flight_;
  response_.reset();
  if (ec || close) return Close();
  Read();
}

template <typename Stream>
void BasicHttpSession<Stream>::Close() {
  if constexpr (kTls<Stream>) {
    // close_notify, bounded: a client that never answers it is dropped at the timeout.
    beast::get_lowest_layer(stream_).expires_after(limits_.read_timeout);
    stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
      beast::error_code ignored;
      beast::get_lowest_layer(self->stream_).socket().close(ignored);
    });
  } else {
    beast::error_code ignored;
    stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
  }
}

template class BasicHttpSession<beast::tcp_stream>;
template class BasicHttpSession<beast::ssl_stream<beast::tcp_stream>>;

}  // namespace manypy
