#include "server/http/http_router.h"

#include <rapidjson/document.h>

#include <vector>

#include "server/http/http_infer_routes.h"
#include "server/http/http_route_table.h"
#include "server/http/http_status.h"
#include "server/http/openai_routes.h"
#include "server/http/proto_json.h"
#include "server/http/repository_codec.h"
#include "server/http/shared_memory_codec.h"

namespace manypy {
namespace {

using Respond = std::function<void(HttpResponse)>;
/// A route's handler: answers through `respond`, exactly once.
using Handler = void (*)(InferenceServer& server, HttpRequest request, const PathParams& path,
                         Respond respond);

HttpResponse Json(const google::protobuf::Message& message) {
  rapidjson::Document doc;
  return {200, JsonText(ProtoToJson(message, doc.GetAllocator()))};
}

HttpResponse JsonBool(const char* key, bool value, int status = 200) {
  return {status, std::string("{\"") + key + "\":" + (value ? "true" : "false") + "}"};
}

/// {} or the error.
HttpResponse Done(const Status& s) {
  return s.ok() ? HttpResponse{200, "{}"} : HttpRouter::Error(s);
}

/// How a repository change's result goes back: {} or the error.
std::function<void(const Status&)> RespondChange(Respond respond) {
  return [respond = std::move(respond)](const Status& s) { respond(Done(s)); };
}

// The OpenAI routes answer errors in OpenAI's body, even before a route is found.
bool IsOpenAi(const HttpRequest& r) {
  std::vector<std::string> p = SplitPath(r.target);
  return !p.empty() && p[0] == "v1";
}

HttpResponse NoRoute(const HttpRequest& r) {
  Status none = NotFound("no route for " + r.method + " " + r.target);
  return IsOpenAi(r) ? OpenAiError(none) : HttpRouter::Error(none);
}

// Server and model routes.

void ServerMetadata(InferenceServer& server, HttpRequest, const PathParams&, Respond respond) {
  inference::ServerMetadataResponse m;
  server.ServerMetadata(&m);
  respond(Json(m));
}

void Live(InferenceServer& server, HttpRequest, const PathParams&, Respond respond) {
  respond(JsonBool("live", server.Live()));
}

void Ready(InferenceServer& server, HttpRequest, const PathParams&, Respond respond) {
  bool ready = server.Ready();
  respond(JsonBool("ready", ready, ready ? 200 : 503));
}

void AllModelStats(InferenceServer& server, HttpRequest, const PathParams&, Respond respond) {
  inference::ModelStatisticsResponse stats;
  Status s = server.ModelStatistics("", "", &stats);
  respond(s.ok() ? Json(stats) : HttpRouter::Error(s));
}

void ModelMetadata(InferenceServer& server, HttpRequest, const PathParams& path, Respond respond) {
  inference::ModelMetadataResponse m;
  Status s = server.ModelMetadata(path["name"], path["version"], &m);
  respond(s.ok() ? Json(m) : HttpRouter::Error(s));
}

void ModelReady(InferenceServer& server, HttpRequest, const PathParams& path, Respond respond) {
  // As the other model routes: an error names why it is not ready.
  Status s = server.ModelReady(path["name"], path["version"]);
  respond(s.ok() ? JsonBool("ready", true) : HttpRouter::Error(s));
}

void ModelConfig(InferenceServer& server, HttpRequest, const PathParams& path, Respond respond) {
  inference::ModelConfigResponse c;
  Status s = server.ModelConfig(path["name"], path["version"], &c);
  respond(s.ok() ? Json(c.config()) : HttpRouter::Error(s));
}

void ModelStats(InferenceServer& server, HttpRequest, const PathParams& path, Respond respond) {
  inference::ModelStatisticsResponse stats;
  Status s = server.ModelStatistics(path["name"], path["version"], &stats);
  respond(s.ok() ? Json(stats) : HttpRouter::Error(s));
}

// Repository routes.

void RepositoryIndex(InferenceServer& server, HttpRequest r, const PathParams&, Respond respond) {
  inference::RepositoryIndexResponse index;
  server.RepositoryIndex(DecodeRepositoryIndexRequest(r.body), &index);
  respond({200, EncodeRepositoryIndex(index)});
}

void Load(InferenceServer& server, HttpRequest r, const PathParams& path, Respond respond) {
  std::vector<std::string> parameters;
  if (Status bad = DecodeLoadRequest(r.body, &parameters); !bad.ok()) {
    return respond(HttpRouter::Error(bad));
  }
  server.LoadModel(path["name"], parameters, RespondChange(std::move(respond)));
}

void Unload(InferenceServer& server, HttpRequest, const PathParams& path, Respond respond) {
  server.UnloadModel(path["name"], RespondChange(std::move(respond)));
}

// Shared-memory routes: a region's name is "" for all of them.

void SystemStatus(InferenceServer& server, HttpRequest r, const PathParams& path, Respond respond) {
  inference::SystemSharedMemoryStatusResponse status;
  Status s = server.SystemSharedMemoryStatus(r.connection, path["name"], &status);
  respond(s.ok() ? HttpResponse{200, EncodeSystemSharedMemoryStatus(status)}
                 : HttpRouter::Error(s));
}

void CudaStatus(InferenceServer& server, HttpRequest r, const PathParams& path, Respond respond) {
  inference::CudaSharedMemoryStatusResponse status;
  Status s = server.CudaSharedMemoryStatus(r.connection, path["name"], &status);
  respond(s.ok() ? HttpResponse{200, EncodeCudaSharedMemoryStatus(status)} : HttpRouter::Error(s));
}

void SystemRegister(InferenceServer& server, HttpRequest r, const PathParams& path,
                    Respond respond) {
  if (path["name"].empty()) return respond(NoRoute(r));  // a region to register needs a name
  inference::SystemSharedMemoryRegisterRequest request;
  Status s = DecodeSystemSharedMemoryRegister(r.body, path["name"], &request);
  if (s.ok()) s = server.SystemSharedMemoryRegister(r.connection, request);
  respond(Done(s));
}

void CudaRegister(InferenceServer& server, HttpRequest r, const PathParams& path, Respond respond) {
  if (path["name"].empty()) return respond(NoRoute(r));
  inference::CudaSharedMemoryRegisterRequest request;
  Status s = DecodeCudaSharedMemoryRegister(r.body, path["name"], &request);
  if (s.ok()) s = server.CudaSharedMemoryRegister(r.connection, request);
  respond(Done(s));
}

void SystemUnregister(InferenceServer& server, HttpRequest r, const PathParams& path,
                      Respond respond) {
  respond(Done(server.SystemSharedMemoryUnregister(r.connection, path["name"])));
}

void CudaUnregister(InferenceServer& server, HttpRequest r, const PathParams& path,
                    Respond respond) {
  respond(Done(server.CudaSharedMemoryUnregister(r.connection, path["name"])));
}

/// Every route. Order matters only where two patterns match one path:
/// /v2/models/stats is all models' statistics, not model "stats"'s metadata.
const RouteTable<Handler>& Routes() {
  static const RouteTable<Handler> routes{
      {"GET", "/v2", ServerMetadata},
      {"GET", "/v2/health/live", Live},
      {"GET", "/v2/health/ready", Ready},
      {"GET", "/v2/models/stats", AllModelStats},
      {"GET", "/v2/models/{name}[/versions/{version}]", ModelMetadata},
      {"GET", "/v2/models/{name}[/versions/{version}]/ready", ModelReady},
      {"GET", "/v2/models/{name}[/versions/{version}]/config", ModelConfig},
      {"GET", "/v2/models/{name}[/versions/{version}]/stats", ModelStats},
      {"POST", "/v2/models/{name}[/versions/{version}]/infer", InferRoute},
      {"POST", "/v2/models/{name}[/versions/{version}]/generate", GenerateRoute},
      {"POST", "/v2/models/{name}[/versions/{version}]/generate_stream", GenerateStreamRoute},
      {"POST", "/v2/repository/index", RepositoryIndex},
      {"POST", "/v2/repository/models/{name}/load", Load},
      {"POST", "/v2/repository/models/{name}/unload", Unload},
      {"GET", "/v2/systemsharedmemory[/region/{name}]/status", SystemStatus},
      {"POST", "/v2/systemsharedmemory/region/{name}/register", SystemRegister},
      {"POST", "/v2/systemsharedmemory[/region/{name}]/unregister", SystemUnregister},
      {"GET", "/v2/cudasharedmemory[/region/{name}]/status", CudaStatus},
      {"POST", "/v2/cudasharedmemory/region/{name}/register", CudaRegister},
      {"POST", "/v2/cudasharedmemory[/region/{name}]/unregister", CudaUnregister},
      {"GET", "/v1/models", OpenAiListModels},
      {"GET", "/v1/models/{model}", OpenAiRetrieveModel},
      {"POST", "/v1/completions", OpenAiCompletions},
      {"POST", "/v1/chat/completions", OpenAiChatCompletions},
      {"POST", "/v1/embeddings", OpenAiEmbeddings},
  };
  return routes;
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
  return AccessScope::kInference;  // unknown routes too: a 404 says nothing to a client without a
                                   // token
}

void HttpRouter::Handle(HttpRequest r, std::function<void(HttpResponse)> respond) {
  Status allowed = server_->Authorize(r.authorization, ScopeOf(r));
  if (!allowed.ok()) {
    HttpResponse refused = IsOpenAi(r) ? OpenAiError(allowed, "",
                                                      allowed.code() == StatusCode::kUnauthenticated
                                                          ? "invalid_api_key"
                                                          : "")
                                       : Error(allowed);
    // RFC 6750: a 401 names the scheme; an invalid token says so.
    if (allowed.code() == StatusCode::kUnauthenticated) {
      refused.headers.emplace_back("WWW-Authenticate",
                                   r.authorization.empty()
                                       ? "Bearer realm=\"manypy\""
                                       : "Bearer realm=\"manypy\", error=\"invalid_token\"");
    } else {
      refused.headers.emplace_back("WWW-Authenticate",
                                   "Bearer realm=\"manypy\", error=\"insufficient_scope\"");
    }
    return respond(std::move(refused));
  }
  PathParams path;
  const Handler* handler = Routes().Find(r.method, r.target, &path);
  if (handler == nullptr) return respond(NoRoute(r));
  (*handler)(*server_, std::move(r), path, std::move(respond));
}

}  // namespace manypy
