// HttpRouter: the KServe v2 REST routes, a table of {method, path, handler},
// as a thin stateless shell over InferenceServer (match, decode, call the
// core, encode, convert the status once); no sockets. Thread-safe, no lock.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "server/core/inference_server.h"
#include "server/http/http_event_stream.h"

namespace manypy {

struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string target;  ///< "/v2/models/m/infer?x=y"
  std::string body;
  std::optional<size_t> inference_header_length;  ///< Inference-Header-Content-Length
  std::string authorization;                      ///< the Authorization header; empty if none
  std::string traceparent;                        ///< W3C trace context headers; empty if none
  std::string tracestate;
  std::function<bool()> cancelled;                ///< optional: the client closed the connection
  WireConnection connection;                      ///< the peer is local; TLS
};

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int code, std::string text) : status(code), body(std::move(text)) {}

  int status = 200;
  std::string body;
  std::string content_type = "application/json";
  std::optional<size_t> inference_header_length;
  std::vector<std::pair<std::string, std::string>> headers;  ///< more fields (WWW-Authenticate)
  /// Set for a server-sent-events response (text/event-stream): `body` is
  /// unused; the connection writes the events as they come, then closes.
  std::shared_ptr<HttpEventStream> events;

  HttpResponse WithStatus(int code) && {
    status = code;
    return std::move(*this);
  }
};

class HttpRouter {
 public:
  /// `server` must outlive the router.
  explicit HttpRouter(InferenceServer* server) : server_(server) {}

  /// Checks the request's bearer token for its route (401/403 with
  /// WWW-Authenticate when refused), then answers `request` through `respond`,
  /// called exactly once: at once, or later from a dispatcher worker or the
  /// model manager's repository thread. The first route of the table in
  /// http_router.cc whose method and path match answers; none: 404 "no route".
  void Handle(HttpRequest request, std::function<void(HttpResponse)> respond);

  /// `status`'s HTTP code with the body {"error": message}.
  static HttpResponse Error(const Status& status);
  /// The token `request` needs: none for /v2/health/*, the management token's
  /// scope for /v2/repository/*, the inference scope for everything else.
  static AccessScope ScopeOf(const HttpRequest& request);

 private:
  InferenceServer* const server_;
};

}  // namespace manypy
