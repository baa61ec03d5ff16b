#include "server/http/http_infer_routes.h"

#include <memory>
#include <mutex>
#include <optional>

#include "common/mutex.h"
#include "server/http/generate_codec.h"
#include "server/http/infer_codec.h"

namespace manypy {
namespace {

// One server-sent event carrying `json`.
std::string Event(const std::string& json) { return "data: " + json + "\n\n"; }

// A generate error as the body of an event or a response: {"error": message}.
std::string ErrorJson(const Status& status) { return HttpRouter::Error(status).body; }

HttpResponse Error(const Status& status) { return HttpRouter::Error(status); }

// The client's trace context and the request span's HTTP attributes
// (OpenTelemetry's http.* / url.* conventions), when tracing is on.
TraceParent TraceOf(const HttpRequest& r, const char* route) {
  if (GetRequestTracer() == nullptr) return {};
  TraceParent trace{r.traceparent, r.tracestate, {}};
  const std::string path = r.target.substr(0, r.target.find('?'));
  trace.attributes = {{"http.request.method", r.method},
                      {"url.path", path},
                      {"http.route", std::string(route)},
                      {"url.scheme", std::string(r.connection.tls ? "https" : "http")}};
  return trace;
}

void Generate(InferenceServer& server, HttpRequest r, const std::string& model,
              const std::string& version, bool stream, std::function<void(HttpResponse)> respond) {
  // The model's inputs type the request's fields.
  inference::ModelMetadataResponse metadata;
  Status found = server.ModelMetadata(model, version, &metadata);
  if (!found.ok()) {
    return server.Refuse(model, version, found,
                         [&respond](const Status& status) { respond(Error(status)); });
  }
  auto wire = std::make_shared<inference::ModelInferRequest>();
  int64_t timeout_us = 0;
  Status decoded = DecodeGenerateRequest(r.body, metadata, version, wire.get(), &timeout_us);
  if (!decoded.ok()) {
    return server.Refuse(model, version, decoded,
                         [&respond](const Status& status) { respond(Error(status)); });
  }
  r.body.clear();
  WireCallOptions options;
  if (timeout_us > 0) options.deadline = Clock::now() + std::chrono::microseconds(timeout_us);
  options.cancelled = std::move(r.cancelled);
  options.stream = std::make_shared<WireStream>();
  options.trace = TraceOf(r, stream ? "/v2/models/{name}[/versions/{version}]/generate_stream"
                                    : "/v2/models/{name}[/versions/{version}]/generate");
  // /generate keeps one response: it needs room for no more.
  if (!stream) options.stream->window = std::make_shared<StreamWindow>(1);
  auto response = std::make_shared<inference::ModelInferResponse>();
  std::weak_ptr<StreamWindow> window = options.stream->window;
  auto release = [window] {
    if (auto w = window.lock()) w->Release();
  };

  if (stream) {
    // The header goes out at once; each response follows as one event.
    auto events = std::make_shared<HttpEventStream>();
    HttpResponse head;
    head.events = events;
    respond(std::move(head));
    options.stream->send = [events, release](inference::ModelInferResponse partial) {
      StatusOr<std::string> json = EncodeGenerateResponse(partial);
      events->Push({Event(json.ok() ? *json : ErrorJson(json.status())), release});
      return Status::Ok();
    };
    std::shared_ptr<WireStream> s = options.stream;
    server.Infer(wire.get(), response.get(), std::move(options),
                 [wire, response, events, s](const Status& status) {
                   if (!status.ok()) {
                     events->Push({Event(ErrorJson(status)), nullptr});
                   } else if (!s->streams) {  // an ordinary model: its one response
                     StatusOr<std::string> json = EncodeGenerateResponse(*response);
                     events->Push({Event(json.ok() ? *json : ErrorJson(json.status())), nullptr});
                   }
                   events->End();
                 });
    return;
  }

  // /generate: one response. A streaming model must yield exactly one; a
  // second ends its stream with a reason that names /generate_stream.
  struct One {
    Mutex mu;
    std::optional<inference::ModelInferResponse> response GUARDED_BY(mu);
  };
  auto one = std::make_shared<One>();
  options.stream->send = [one, release, model](inference::ModelInferResponse partial) {
    release();
    MutexLock lock(one->mu);
    if (one->response) {
      return InvalidArgument("model '" + model +
                             "' yielded more than one response: /generate answers with one; "
                             "call /generate_stream for all of them");
    }
    one->response = std::move(partial);
    return Status::Ok();
  };
  std::shared_ptr<WireStream> s = options.stream;
  server.Infer(wire.get(), response.get(), std::move(options),
               [wire, response, one, s, respond = std::move(respond)](const Status& status) {
                 if (!status.ok()) return respond(Error(status));
                 const inference::ModelInferResponse* answer = response.get();
                 if (s->streams) {
                   MutexLock lock(one->mu);
                   if (!one->response) {
                     return respond(
                         Error(Internal("model '" + wire->model_name() + "' yielded no response")));
                   }
                   answer = &*one->response;
                 }
                 StatusOr<std::string> json = EncodeGenerateResponse(*answer);
                 respond(json.ok() ? HttpResponse{200, *json} : Error(json.status()));
               });
}

}  // namespace

void InferRoute(InferenceServer& server, HttpRequest r, const PathParams& path,
                std::function<void(HttpResponse)> respond) {
  const std::string& model = path["name"];
  const std::string& version = path["version"];
  // Both live until the reply: the encoder reads the requested outputs.
  auto request = std::make_shared<HttpInferRequest>();
  Status decoded =
      DecodeInferRequest(r.body, r.inference_header_length, model, version, request.get());
  if (!decoded.ok()) {
    return server.Refuse(model, version, decoded,
                         [&respond](const Status& status) { respond(Error(status)); });
  }
  r.body.clear();
  r.body.shrink_to_fit();
  auto response = std::make_shared<inference::ModelInferResponse>();
  WireCallOptions options;
  if (request->timeout_us > 0) {
    options.deadline = Clock::now() + std::chrono::microseconds(request->timeout_us);
  }
  options.cancelled = std::move(r.cancelled);
  options.connection = r.connection;
  options.trace = TraceOf(r, "/v2/models/{name}[/versions/{version}]/infer");
  options.run_here_if_idle = true;  // on this I/O thread when an interpreter is idle
  server.Infer(&request->wire, response.get(), std::move(options),
               // On a dispatcher worker, or this I/O thread when the call ran here
               // (as gRPC's reply is): encoding is CPU work on bytes in memory;
               // `respond` posts the write to the connection's strand, so no
               // worker ever waits on the network.
               [request, response, respond = std::move(respond)](const Status& status) {
                 if (!status.ok()) return respond(Error(status));
                 auto encoded = EncodeInferResponse(*response, *request);
                 if (!encoded.ok()) return respond(Error(encoded.status()));
                 HttpResponse out{200, std::move(encoded->body)};
                 out.inference_header_length = encoded->json_length;
                 if (out.inference_header_length) out.content_type = "application/octet-stream";
                 respond(std::move(out));
               });
}

void GenerateRoute(InferenceServer& server, HttpRequest request, const PathParams& path,
                   std::function<void(HttpResponse)> respond) {
  Generate(server, std::move(request), path["name"], path["version"], /*stream=*/false,
           std::move(respond));
}

void GenerateStreamRoute(InferenceServer& server, HttpRequest request, const PathParams& path,
                         std::function<void(HttpResponse)> respond) {
  Generate(server, std::move(request), path["name"], path["version"], /*stream=*/true,
           std::move(respond));
}

}  // namespace manypy
