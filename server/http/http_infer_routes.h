// The routes that run a model: /infer, /generate and /generate_stream, each
// decode -> InferenceServer::Infer -> encode. Stateless; thread-safe.
// No lock held by the caller; `respond` may run later on a dispatcher worker.
#pragma once

#include <functional>

#include "server/core/inference_server.h"
#include "server/http/http_route_table.h"
#include "server/http/http_router.h"

namespace manypy {

/// POST /v2/models/{name}[/versions/{version}]/infer: the KServe v2 JSON
/// request (binary data after Inference-Header-Content-Length), answered the same way.
void InferRoute(InferenceServer& server, HttpRequest request, const PathParams& path,
                std::function<void(HttpResponse)> respond);

/// POST .../generate: one JSON response; a streaming model must yield exactly one.
void GenerateRoute(InferenceServer& server, HttpRequest request, const PathParams& path,
                   std::function<void(HttpResponse)> respond);

/// POST .../generate_stream: server-sent events, one per response.
void GenerateStreamRoute(InferenceServer& server, HttpRequest request, const PathParams& path,
                         std::function<void(HttpResponse)> respond);

}  // namespace manypy
