#include "server/http/http_session.h"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

namespace manypy {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

void HttpSession::Start() {
  net::dispatch(stream_.get_executor(), beast::bind_front_handler(&HttpSession::Read, shared_from_this()));
}

void HttpSession::Read() {
  parser_.emplace();
  parser_->body_limit(limits_.max_body_bytes);
  // Idle keep-alive connections and slow senders alike: the whole request
  // must arrive within the timeout.
  stream_.expires_after(limits_.read_timeout);
  http::async_read(stream_, buffer_, *parser_,
                   beast::bind_front_handler(&HttpSession::OnRead, shared_from_this()));
}

void HttpSession::OnRead(beast::error_code ec, size_t) {
  if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
      ec == net::error::operation_aborted || ec == net::error::connection_reset) {
    return Close();
  }
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
  stream_.expires_never();  // the request may wait in a model's queue; no read is pending
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
  request.body = std::move(req.body());
  bool keep_alive = req.keep_alive();
  unsigned version = req.version();
  // The router may answer from a worker thread: the write goes back to this strand.
  router_->Handle(std::move(request),
                  [self = shared_from_this(), keep_alive, version](HttpResponse response) {
                    net::post(self->stream_.get_executor(),
                              [self, response = std::move(response), keep_alive, version]() mutable {
                                self->Reply(std::move(response), keep_alive, version);
                              });
                  });
}

void HttpSession::Reply(HttpResponse r, bool keep_alive, unsigned version) {
  response_ = std::make_shared<Response>(static_cast<http::status>(r.status), version);
  response_->set(http::field::server, "manypy");
  response_->set(http::field::content_type, r.content_type);
  if (r.inference_header_length) {
    response_->set("Inference-Header-Content-Length", std::to_string(*r.inference_header_length));
  }
  response_->keep_alive(keep_alive);
  response_->body() = std::move(r.body);
  response_->prepare_payload();
  stream_.expires_after(limits_.read_timeout);  // a client that stops reading is cut off too
  http::async_write(stream_, *response_,
                    beast::bind_front_handler(&HttpSession::OnWrite, shared_from_this(), !keep_alive));
}

void HttpSession::OnWrite(bool close, beast::error_code ec, size_t) {
  --*in_flight_;
  response_.reset();
  if (ec || close) return Close();
  Read();
}

void HttpSession::Close() {
  beast::error_code ignored;
  stream_.socket().shutdown(net::ip::tcp::socket::shutdown_send, ignored);
}

}  // namespace manypy
