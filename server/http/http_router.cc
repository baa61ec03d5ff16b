#include "server/http/http_router.h"

#include <rapidjson/document.h>

#include <memory>
#include <thread>
#include <vector>

#include "server/grpc/protocol_metadata.h"
#include "server/http/http_status.h"
#include "server/http/infer_codec.h"
#include "server/http/proto_json.h"
#include "server/models/load_request.h"
#include "server/models/wire_infer.h"

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
/// `config`, `file:<path>`) CheckLoadParameters refuses.
Status CheckLoadBody(const std::string& body) {
  if (body.empty()) return Status::Ok();
  rapidjson::Document doc;
  if (doc.Parse(body.data(), body.size()).HasParseError() || !doc.IsObject()) {
    return InvalidArgument("the load request's body is not a JSON object");
  }
  if (!doc.HasMember("parameters")) return Status::Ok();
  if (!doc["parameters"].IsObject()) return InvalidArgument("the load request's \"parameters\" is not an object");
  std::vector<std::string> names;
  for (const auto& m : doc["parameters"].GetObject()) names.emplace_back(m.name.GetString(), m.name.GetStringLength());
  return CheckLoadParameters(names);
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
  Status allowed = options_.tokens.Authorize(r.authorization, ScopeOf(r));
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
    FillServerMetadata(&m);
    return respond(Json(m));
  }
  if (p.size() == 3 && p[1] == "health" && get) {
    if (p[2] == "live") return respond(JsonBool("live", true));
    if (p[2] == "ready") return respond(JsonBool("ready", !draining_, draining_ ? 503 : 200));
  }
  if (p.size() == 3 && p[1] == "models" && p[2] == "stats" && get) {
    inference::ModelStatisticsResponse stats;
    for (const auto& model : models_->ReadyModels()) FillModelStatistics(*model, stats.add_model_stats());
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
    if (!get || action == "?" || action == "infer") return respond(NoRoute(r));
    auto model = models_->Get(name, version);
    if (!model.ok()) return respond(Error(model.status()));
    if (action == "ready") return respond(JsonBool("ready", true));
    if (action.empty()) {
      inference::ModelMetadataResponse m;
      FillModelMetadata(**model, *models_, &m);
      return respond(Json(m));
    }
    if (action == "config") {
      inference::ModelConfigResponse c;
      FillModelConfig(**model, &c);
      return respond(Json(c.config()));
    }
    if (action == "stats") {
      inference::ModelStatisticsResponse stats;
      FillModelStatistics(**model, stats.add_model_stats());
      return respond(Json(stats));
    }
    return respond(NoRoute(r));
  }
  if (p.size() == 3 && p[1] == "repository" && p[2] == "index" && post) {
    bool ready_only = false;
    rapidjson::Document body;
    if (!r.body.empty() && !body.Parse(r.body.data(), r.body.size()).HasParseError() &&
        body.IsObject() && body.HasMember("ready") && body["ready"].IsBool()) {
      ready_only = body["ready"].GetBool();
    }
    inference::RepositoryIndexResponse index;
    FillRepositoryIndex(*models_, ready_only, &index);
    rapidjson::Document doc(rapidjson::kArrayType);  // Triton answers a bare array
    for (const auto& m : index.models()) doc.PushBack(ProtoToJson(m, doc.GetAllocator()), doc.GetAllocator());
    return respond({200, JsonText(doc)});
  }
  if (p.size() == 5 && p[1] == "repository" && p[2] == "models" && post) {
    std::string name = p[3];
    if (p[4] == "load") {
      if (Status refused = CheckLoadBody(r.body); !refused.ok()) return respond(Error(refused));
      return ChangeRepository("loading", [this, name] { return models_->Load(name); }, std::move(respond));
    }
    if (p[4] == "unload") {
      return ChangeRepository("unloading", [this, name] { return models_->Unload(name); },
                              std::move(respond));
    }
  }
  respond(NoRoute(r));
}

void HttpRouter::ChangeRepository(const char* verb, std::function<Status()> change,
                                  std::function<void(HttpResponse)> respond) {
  if (!options_.explicit_model_control) {
    // 503 (UNAVAILABLE), as Triton answers outside its explicit model control mode.
    return respond(Error(Unavailable(std::string(verb) +
                                     " models on request is off: it needs --model-control-mode=explicit")));
  }
  // Loading runs Python in every interpreter for seconds: not on an I/O thread.
  std::thread([change = std::move(change), respond = std::move(respond)] {
    Status s = change();
    respond(s.ok() ? HttpResponse{200, "{}"} : Error(s));
  }).detach();
}

void HttpRouter::Infer(HttpRequest r, const std::string& model, const std::string& version,
                       std::function<void(HttpResponse)> respond) {
  // Both live until the reply: the encoder reads the requested outputs.
  auto request = std::make_shared<HttpInferRequest>();
  Status decoded = DecodeInferRequest(r.body, r.inference_header_length, model, version, request.get());
  if (!decoded.ok()) {
    return RefuseWire(models_, model, version, decoded,
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
  InferWire(models_, &request->wire, response.get(), std::move(options),
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
