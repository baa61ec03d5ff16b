#include "server/http/openai_routes.h"

#include <rapidjson/document.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "common/mutex.h"
#include "server/http/http_status.h"
#include "server/http/openai_answer_codec.h"
#include "server/http/openai_request_codec.h"
#include "server/http/proto_json.h"

namespace manypy {
namespace {

using Respond = std::function<void(HttpResponse)>;

std::string Event(const std::string& json) { return "data: " + json + "\n\n"; }

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An id unique in this process's life: "cmpl-<seconds>-<n>".
std::string NewId(const char* prefix) {
  static std::atomic<uint64_t> next{0};
  return std::string(prefix) + std::to_string(NowSeconds()) + "-" + std::to_string(++next);
}

// Refuses through the request path (counted once, as every refusal), in OpenAI's body.
void Refuse(InferenceServer& server, const std::string& model, const Status& status,
            const std::string& param, const std::string& code, const Respond& respond) {
  server.Refuse(model, "", status, [&](const Status& s) { respond(OpenAiError(s, param, code)); });
}

std::string ModelJson(const std::string& name) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("id", rapidjson::Value(name.c_str(), a), a);
  doc.AddMember("object", "model", a);
  doc.AddMember("created", 0, a);
  doc.AddMember("owned_by", "manypy", a);
  return JsonText(doc);
}

// The model of a request, checked to serve `route`; false when refused (answered).
bool FindModel(InferenceServer& server, const OpenAiCall& call, OpenAiSpec* spec,
               inference::ModelMetadataResponse* metadata, const Respond& respond) {
  Status found = server.OpenAiModel(call.model, spec, metadata);
  if (!found.ok()) {
    Refuse(server, call.model, found, "model",
           found.code() == StatusCode::kNotFound ? "model_not_found" : "", respond);
    return false;
  }
  if (!spec->Serves(call.route)) {
    std::string serves;
    for (const std::string& r : spec->routes) serves += (serves.empty() ? "/v1/" : ", /v1/") + r;
    Refuse(server, call.model,
           InvalidArgument("model '" + call.model + "' does not serve /v1/" + call.route +
                           (serves.empty() ? " (it is declared for no OpenAI route)"
                                           : " (it serves " + serves + ")")),
           "model", "model_not_supported", respond);
    return false;
  }
  return true;
}

// Completions and chat completions: one model call, its responses streamed
// as chunks or joined into one answer.
void Generate(InferenceServer& server, HttpRequest r, const std::string& route, Respond respond) {
  rapidjson::Document doc;
  OpenAiCall call;
  std::string param;
  Status decoded = DecodeOpenAiCall(r.body, route, &doc, &call, &param);
  if (!decoded.ok()) return Refuse(server, call.model, decoded, param, "", respond);
  OpenAiSpec spec;
  inference::ModelMetadataResponse metadata;
  if (!FindModel(server, call, &spec, &metadata, respond)) return;
  auto wire = std::make_shared<inference::ModelInferRequest>();
  decoded = DecodeOpenAiInputs(doc, &call, spec, metadata, wire.get(), &param);
  if (!decoded.ok()) return Refuse(server, call.model, decoded, param, "", respond);
  r.body.clear();

  // The answer is fed from the worker that runs the model, response by response.
  struct Shared {
    explicit Shared(OpenAiAnswer a) : answer(std::move(a)) {}
    Mutex mu;
    OpenAiAnswer answer GUARDED_BY(mu);
  };
  const bool stream = call.stream;
  auto shared = std::make_shared<Shared>(
      OpenAiAnswer(call, spec, NewId(route == kChatRoute ? "chatcmpl-" : "cmpl-"), NowSeconds()));
  WireCallOptions options;
  options.cancelled = std::move(r.cancelled);
  options.connection = r.connection;
  options.stream = std::make_shared<WireStream>();
  std::weak_ptr<StreamWindow> window = options.stream->window;
  auto release = [window] {
    if (auto w = window.lock()) w->Release();
  };
  auto response = std::make_shared<inference::ModelInferResponse>();
  std::shared_ptr<WireStream> s = options.stream;

  if (stream) {
    auto events = std::make_shared<HttpEventStream>();
    HttpResponse head;
    head.events = events;
    respond(std::move(head));
    options.stream->send = [shared, events, release](inference::ModelInferResponse partial) {
      StatusOr<std::string> chunk = [&] {
        MutexLock lock(shared->mu);
        return shared->answer.Add(partial);
      }();
      if (!chunk.ok()) {
        release();
        return chunk.status();  // ends the stream; the final reply reports it
      }
      if (chunk->empty()) {
        release();
      } else {
        events->Push({Event(*chunk), release});
      }
      return Status::Ok();
    };
    server.Infer(wire.get(), response.get(), std::move(options),
                 [wire, response, events, shared, s](const Status& status) {
                   // The last events, made under the lock and pushed outside it.
                   std::vector<std::string> last;
                   {
                     MutexLock lock(shared->mu);
                     Status result = status;
                     if (result.ok() && !s->streams) {  // an ordinary model: its one response
                       StatusOr<std::string> chunk = shared->answer.Add(*response);
                       if (!chunk.ok()) result = chunk.status();
                       else if (!chunk->empty()) last.push_back(Event(*chunk));
                     }
                     if (!result.ok()) {
                       last.push_back(Event(OpenAiErrorJson(result, "", "")));
                     } else {
                       for (const std::string& chunk : shared->answer.FinishChunks()) {
                         last.push_back(Event(chunk));
                       }
                       last.push_back("data: [DONE]\n\n");
                     }
                   }
                   for (std::string& event : last) events->Push({std::move(event), nullptr});
                   events->End();
                 });
    return;
  }

  options.stream->send = [shared, release](inference::ModelInferResponse partial) {
    release();
    MutexLock lock(shared->mu);
    StatusOr<std::string> chunk = shared->answer.Add(partial);
    return chunk.ok() ? Status::Ok() : chunk.status();
  };
  server.Infer(wire.get(), response.get(), std::move(options),
               [wire, response, shared, s, respond = std::move(respond)](const Status& status) {
                 if (!status.ok()) return respond(OpenAiError(status));
                 StatusOr<std::string> whole = [&]() -> StatusOr<std::string> {
                   MutexLock lock(shared->mu);
                   if (!s->streams) {  // an ordinary model: its one response
                     StatusOr<std::string> chunk = shared->answer.Add(*response);
                     if (!chunk.ok()) return chunk.status();
                   }
                   return shared->answer.Whole();
                 }();
                 respond(whole.ok() ? HttpResponse{200, *whole} : OpenAiError(whole.status()));
               });
}

}  // namespace

HttpResponse OpenAiError(const Status& status, const std::string& param, const std::string& code) {
  return {ToHttpStatus(status), OpenAiErrorJson(status, param, code)};
}

void OpenAiListModels(InferenceServer& server, HttpRequest, const PathParams&, Respond respond) {
  std::string data;
  for (const std::string& name : server.OpenAiModels()) {
    data += (data.empty() ? "" : ",") + ModelJson(name);
  }
  respond({200, "{\"object\":\"list\",\"data\":[" + data + "]}"});
}

void OpenAiRetrieveModel(InferenceServer& server, HttpRequest, const PathParams& path,
                         Respond respond) {
  OpenAiSpec spec;
  inference::ModelMetadataResponse metadata;
  Status found = server.OpenAiModel(path["model"], &spec, &metadata);
  if (found.ok() && spec.routes.empty()) {
    found = NotFound("model '" + path["model"] + "' is declared for no OpenAI route");
  }
  if (!found.ok()) {
    return respond(OpenAiError(found, "model",
                               found.code() == StatusCode::kNotFound ? "model_not_found" : ""));
  }
  respond({200, ModelJson(path["model"])});
}

void OpenAiCompletions(InferenceServer& server, HttpRequest request, const PathParams&,
                       Respond respond) {
  Generate(server, std::move(request), kCompletionsRoute, std::move(respond));
}

void OpenAiChatCompletions(InferenceServer& server, HttpRequest request, const PathParams&,
                           Respond respond) {
  Generate(server, std::move(request), kChatRoute, std::move(respond));
}

void OpenAiEmbeddings(InferenceServer& server, HttpRequest r, const PathParams&, Respond respond) {
  rapidjson::Document doc;
  auto call = std::make_shared<OpenAiCall>();
  std::string param;
  Status decoded = DecodeOpenAiCall(r.body, kEmbeddingsRoute, &doc, call.get(), &param);
  if (!decoded.ok()) return Refuse(server, call->model, decoded, param, "", respond);
  auto spec = std::make_shared<OpenAiSpec>();
  inference::ModelMetadataResponse metadata;
  if (!FindModel(server, *call, spec.get(), &metadata, respond)) return;
  auto wire = std::make_shared<inference::ModelInferRequest>();
  decoded = DecodeOpenAiInputs(doc, call.get(), *spec, metadata, wire.get(), &param);
  if (!decoded.ok()) return Refuse(server, call->model, decoded, param, "", respond);
  r.body.clear();
  WireCallOptions options;
  options.cancelled = std::move(r.cancelled);
  options.connection = r.connection;
  auto response = std::make_shared<inference::ModelInferResponse>();
  server.Infer(wire.get(), response.get(), std::move(options),
               [wire, response, call, spec, respond = std::move(respond)](const Status& status) {
                 if (!status.ok()) return respond(OpenAiError(status));
                 std::string param;
                 StatusOr<std::string> json = EncodeEmbeddings(*call, *spec, *response, &param);
                 respond(json.ok() ? HttpResponse{200, *json} : OpenAiError(json.status(), param));
               });
}

}  // namespace manypy
