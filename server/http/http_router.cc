#include "server/http/http_router.h"

#include <rapidjson/document.h>

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "server/http/generate_codec.h"
#include "server/http/http_status.h"
#include "server/http/infer_codec.h"
#include "server/http/proto_json.h"

namespace manypy {
namespace {

std::vector<std::string> SplitPath(const std::string& target) {
  std::string path = target.substr(0, target.find('?'));
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    parts.push_back(path.substr(start, slash - start));
    start = slash + 1;
  }
  if (!parts.empty() && parts.back().empty()) parts.pop_back();  // a trailing slash
  return parts;
}

HttpResponse Json(const google::protobuf::Message& message) {
  rapidjson::Document doc;
  return {200, JsonText(ProtoToJson(message, doc.GetAllocator()))};
}

HttpResponse JsonBool(const char* key, bool value, int status = 200) {
  return {status, std::string("{\"") + key + "\":" + (value ? "true" : "false") + "}"};
}

/// A load request's body: empty, or a JSON object whose "parameters" (Triton's
/// `config`, `file:<path>`) the core refuses; their names go to `names`.
Status DecodeLoadBody(const std::string& body, std::vector<std::string>* names) {
  if (body.empty()) return Status::Ok();
  rapidjson::Document doc;
  if (doc.Parse(body.data(), body.size()).HasParseError() || !doc.IsObject()) {
    return InvalidArgument("the load request's body is not a JSON object");
  }
  if (!doc.HasMember("parameters")) return Status::Ok();
  if (!doc["parameters"].IsObject()) return InvalidArgument("the load request's \"parameters\" is not an object");
  for (const auto& m : doc["parameters"].GetObject()) {
    names->emplace_back(m.name.GetString(), m.name.GetStringLength());
  }
  return Status::Ok();
}

/// How a repository change's result goes back: {} or the error.
std::function<void(const Status&)> RespondChange(std::function<void(HttpResponse)> respond) {
  return [respond = std::move(respond)](const Status& s) {
    respond(s.ok() ? HttpResponse{200, "{}"} : HttpRouter::Error(s));
  };
}

HttpResponse NoRoute(const HttpRequest& r) {
  return HttpRouter::Error(NotFound("no route for " + r.method + " " + r.target));
}

}  // namespace

HttpResponse HttpRouter::Error(const Status& status) {
  rapidjson::Document doc(rapidjson::kObjectType);
  doc.AddMember("error", rapidjson::Value(status.message().c_str(), doc.GetAllocator()),
                doc.GetAllocator());
  return {ToHttpStatus(status), JsonText(doc)};
}

AccessScope HttpRouter::ScopeOf(const HttpRequest& r) {
  std::vector<std::string> p = SplitPath(r.target);
  if (p.size() == 3 && p[0] == "v2" && p[1] == "health") return AccessScope::kOpen;
  if (p.size() >= 2 && p[0] == "v2" && p[1] == "repository") return AccessScope::kManagement;
  return AccessScope::kInference;  // unknown routes too: a 404 says nothing to a client without a token
}

void HttpRouter::Handle(HttpRequest r, std::function<void(HttpResponse)> respond) {
  Status allowed = server_->Authorize(r.authorization, ScopeOf(r));
  if (!allowed.ok()) {
    HttpResponse refused = Error(allowed);
    // RFC 6750: a 401 names the scheme; an invalid token says so.
    if (allowed.code() == StatusCode::kUnauthenticated) {
      refused.headers.emplace_back("WWW-Authenticate", r.authorization.empty()
                                                           ? "Bearer realm=\"manypy\""
                                                           : "Bearer realm=\"manypy\", error=\"invalid_token\"");
    } else {
      refused.headers.emplace_back("WWW-Authenticate",
                                   "Bearer realm=\"manypy\", error=\"insufficient_scope\"");
    }
    return respond(std::move(refused));
  }
  Route(std::move(r), std::move(respond));
}

void HttpRouter::Route(HttpRequest r, std::function<void(HttpResponse)> respond) {
  std::vector<std::string> p = SplitPath(r.target);
  bool get = r.method == "GET", post = r.method == "POST";
  if (p.empty() || p[0] != "v2") return respond(NoRoute(r));
  if (p.size() == 1 && get) {
    inference::ServerMetadataResponse m;
    server_->ServerMetadata(&m);
    return respond(Json(m));
  }
  if (p.size() == 3 && p[1] == "health" && get) {
    if (p[2] == "live") return respond(JsonBool("live", server_->Live()));
    if (p[2] == "ready") {
      bool ready = server_->Ready();
      return respond(JsonBool("ready", ready, ready ? 200 : 503));
    }
  }
  if (p.size() == 3 && p[1] == "models" && p[2] == "stats" && get) {
    inference::ModelStatisticsResponse stats;
    server_->ModelStatistics("", "", &stats);
    return respond(Json(stats));
  }
  if (p.size() >= 3 && p[1] == "models") {
    const std::string& name = p[2];
    std::string version;
    size_t rest = 3;
    if (p.size() >= 5 && p[3] == "versions") {
      version = p[4];
      rest = 5;
    }
    std::string action = p.size() == rest ? "" : p.size() == rest + 1 ? p[rest] : "?";
    if (action == "infer" && post) return Infer(std::move(r), name, version, std::move(respond));
    if ((action == "generate" || action == "generate_stream") && post) {
      return Generate(std::move(r), name, version, action == "generate_stream", std::move(respond));
    }
    if (!get || action == "?" || action == "infer" || action == "generate" ||
        action == "generate_stream") {
      return respond(NoRoute(r));
    }
    if (action == "ready") {
      // As the other model routes: an error names why it is not ready.
      Status s = server_->ModelReady(name, version);
      return respond(s.ok() ? JsonBool("ready", true) : Error(s));
    }
    if (action.empty()) {
      inference::ModelMetadataResponse m;
      Status s = server_->ModelMetadata(name, version, &m);
      return respond(s.ok() ? Json(m) : Error(s));
    }
    if (action == "config") {
      inference::ModelConfigResponse c;
      Status s = server_->ModelConfig(name, version, &c);
      return respond(s.ok() ? Json(c.config()) : Error(s));
    }
    if (action == "stats") {
      inference::ModelStatisticsResponse stats;
      Status s = server_->ModelStatistics(name, version, &stats);
      return respond(s.ok() ? Json(stats) : Error(s));
    }
    return respond(NoRoute(r));
  }
  if (p.size() >= 3 && (p[1] == "systemsharedmemory" || p[1] == "cudasharedmemory")) {
    return respond(SharedMemory(r, p));
  }
  if (p.size() == 3 && p[1] == "repository" && p[2] == "index" && post) {
    bool ready_only = false;
    rapidjson::Document body;
    if (!r.body.empty() && !body.Parse(r.body.data(), r.body.size()).HasParseError() &&
        body.IsObject() && body.HasMember("ready") && body["ready"].IsBool()) {
      ready_only = body["ready"].GetBool();
    }
    inference::RepositoryIndexResponse index;
    server_->RepositoryIndex(ready_only, &index);
    rapidjson::Document doc(rapidjson::kArrayType);  // Triton answers a bare array
    for (const auto& m : index.models()) doc.PushBack(ProtoToJson(m, doc.GetAllocator()), doc.GetAllocator());
    return respond({200, JsonText(doc)});
  }
  if (p.size() == 5 && p[1] == "repository" && p[2] == "models" && post) {
    std::string name = p[3];
    if (p[4] == "load") {
      std::vector<std::string> parameters;
      if (Status bad = DecodeLoadBody(r.body, &parameters); !bad.ok()) return respond(Error(bad));
      return server_->LoadModel(name, parameters, RespondChange(std::move(respond)));
    }
    if (p[4] == "unload") return server_->UnloadModel(name, RespondChange(std::move(respond)));
  }
  respond(NoRoute(r));
}

HttpResponse HttpRouter::SharedMemory(const HttpRequest& r, const std::vector<std::string>& p) {
  // [v2, kind, (region, NAME,) verb]
  const bool cuda = p[1] == "cudasharedmemory";
  std::string name;
  std::string verb;
  if (p.size() == 3) {
    verb = p[2];
  } else if (p.size() == 5 && p[2] == "region") {
    name = p[3];
    verb = p[4];
  } else {
    return NoRoute(r);
  }
  const bool get = r.method == "GET", post = r.method == "POST";
  if (verb == "status" && get) {
    rapidjson::Document doc(rapidjson::kArrayType);  // Triton answers a bare array
    auto& a = doc.GetAllocator();
    if (cuda) {
      inference::CudaSharedMemoryStatusResponse status;
      Status s = server_->CudaSharedMemoryStatus(r.connection, name, &status);
      if (!s.ok()) return Error(s);
    } else {
      inference::SystemSharedMemoryStatusResponse status;
      Status s = server_->SystemSharedMemoryStatus(r.connection, name, &status);
      if (!s.ok()) return Error(s);
      for (const auto& [region, info] : status.regions()) {
        rapidjson::Value one(rapidjson::kObjectType);
        one.AddMember("name", rapidjson::Value(region.c_str(), a), a);
        one.AddMember("key", rapidjson::Value(info.key().c_str(), a), a);
        one.AddMember("offset", rapidjson::Value(info.offset()), a);
        one.AddMember("byte_size", rapidjson::Value(info.byte_size()), a);
        doc.PushBack(one, a);
      }
    }
    return {200, JsonText(doc)};
  }
  if (verb == "unregister" && post) {
    Status s = cuda ? server_->CudaSharedMemoryUnregister(r.connection, name)
                    : server_->SystemSharedMemoryUnregister(r.connection, name);
    return s.ok() ? HttpResponse{200, "{}"} : Error(s);
  }
  if (verb == "register" && post && !name.empty()) {
    rapidjson::Document body;
    if (body.Parse(r.body.data(), r.body.size()).HasParseError() || !body.IsObject()) {
      return Error(InvalidArgument("the register request's body is not a JSON object"));
    }
    auto size_of = [&body](const char* key, uint64_t* out) {
      auto it = body.FindMember(key);
      if (it == body.MemberEnd()) return false;
      if (!it->value.IsUint64()) return false;
      *out = it->value.GetUint64();
      return true;
    };
    uint64_t offset = 0, byte_size = 0, device_id = 0;
    if (body.HasMember("offset") && !size_of("offset", &offset)) {
      return Error(InvalidArgument("register: 'offset' must be a non-negative integer"));
    }
    if (!size_of("byte_size", &byte_size)) {
      return Error(InvalidArgument("register: 'byte_size' must be given, a non-negative integer"));
    }
    if (cuda) {
      inference::CudaSharedMemoryRegisterRequest request;
      request.set_name(name);
      request.set_byte_size(byte_size);
      if (size_of("device_id", &device_id)) request.set_device_id(static_cast<int64_t>(device_id));
      Status s = server_->CudaSharedMemoryRegister(r.connection, request);
      return s.ok() ? HttpResponse{200, "{}"} : Error(s);
    }
    auto key = body.FindMember("key");
    if (key == body.MemberEnd() || !key->value.IsString()) {
      return Error(InvalidArgument("register: 'key' must be given, a string"));
    }
    inference::SystemSharedMemoryRegisterRequest request;
    request.set_name(name);
    request.set_key(key->value.GetString(), key->value.GetStringLength());
    request.set_offset(offset);
    request.set_byte_size(byte_size);
    Status s = server_->SystemSharedMemoryRegister(r.connection, request);
    return s.ok() ? HttpResponse{200, "{}"} : Error(s);
  }
  return NoRoute(r);
}

void HttpRouter::Infer(HttpRequest r, const std::string& model, const std::string& version,
                       std::function<void(HttpResponse)> respond) {
  // Both live until the reply: the encoder reads the requested outputs.
  auto request = std::make_shared<HttpInferRequest>();
  Status decoded = DecodeInferRequest(r.body, r.inference_header_length, model, version, request.get());
  if (!decoded.ok()) {
    return server_->Refuse(model, version, decoded,
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
  server_->Infer(&request->wire, response.get(), std::move(options),
            // On a dispatcher worker (as gRPC's reply is): encoding is CPU work on
            // bytes in memory; `respond` posts the write to the connection's strand,
            // so no worker ever waits on the network.
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

}  // namespace manypy

namespace manypy {
namespace {

// One server-sent event carrying `json`.
std::string Event(const std::string& json) { return "data: " + json + "\n\n"; }

// A generate error as the body of an event or a response: {"error": message}.
std::string ErrorJson(const Status& status) { return HttpRouter::Error(status).body; }

}  // namespace

void HttpRouter::Generate(HttpRequest r, const std::string& model, const std::string& version,
                          bool stream, std::function<void(HttpResponse)> respond) {
  // The model's inputs type the request's fields.
  inference::ModelMetadataResponse metadata;
  Status found = server_->ModelMetadata(model, version, &metadata);
  if (!found.ok()) {
    return server_->Refuse(model, version, found,
                           [&respond](const Status& status) { respond(Error(status)); });
  }
  auto wire = std::make_shared<inference::ModelInferRequest>();
  int64_t timeout_us = 0;
  Status decoded = DecodeGenerateRequest(r.body, metadata, version, wire.get(), &timeout_us);
  if (!decoded.ok()) {
    return server_->Refuse(model, version, decoded,
                           [&respond](const Status& status) { respond(Error(status)); });
  }
  r.body.clear();
  WireCallOptions options;
  if (timeout_us > 0) options.deadline = Clock::now() + std::chrono::microseconds(timeout_us);
  options.cancelled = std::move(r.cancelled);
  options.stream = std::make_shared<WireStream>();
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
    server_->Infer(wire.get(), response.get(), std::move(options),
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
    std::mutex mu;
    std::optional<inference::ModelInferResponse> response;  // guarded by mu
  };
  auto one = std::make_shared<One>();
  options.stream->send = [one, release, model](inference::ModelInferResponse partial) {
    release();
    std::lock_guard<std::mutex> lock(one->mu);
    if (one->response) {
      return InvalidArgument("model '" + model +
                             "' yielded more than one response: /generate answers with one; "
                             "call /generate_stream for all of them");
    }
    one->response = std::move(partial);
    return Status::Ok();
  };
  std::shared_ptr<WireStream> s = options.stream;
  server_->Infer(wire.get(), response.get(), std::move(options),
                 [wire, response, one, s, respond = std::move(respond)](const Status& status) {
                   if (!status.ok()) return respond(Error(status));
                   const inference::ModelInferResponse* answer = response.get();
                   if (s->streams) {
                     std::lock_guard<std::mutex> lock(one->mu);
                     if (!one->response) {
                       return respond(Error(Internal("model '" + wire->model_name() +
                                                     "' yielded no response")));
                     }
                     answer = &*one->response;
                   }
                   StatusOr<std::string> json = EncodeGenerateResponse(*answer);
                   respond(json.ok() ? HttpResponse{200, *json} : Error(json.status()));
                 });
}

}  // namespace manypy
