// The OpenAI-compatible routes (docs/text-generation.md): /v1/models,
// /v1/completions, /v1/chat/completions, /v1/embeddings, each decode
// (openai_request_codec.h) -> InferenceServer::Infer -> encode
// (openai_answer_codec.h). Stateless; thread-safe. No lock held by the
// caller; `respond` may run later on a dispatcher worker.
#pragma once

#include <functional>

#include "server/core/inference_server.h"
#include "server/http/http_route_table.h"
#include "server/http/http_router.h"

namespace manypy {

/// GET /v1/models: every model declared for an OpenAI route.
void OpenAiListModels(InferenceServer& server, HttpRequest request, const PathParams& path,
                      std::function<void(HttpResponse)> respond);
/// GET /v1/models/{model}: one of them (404 model_not_found otherwise).
void OpenAiRetrieveModel(InferenceServer& server, HttpRequest request, const PathParams& path,
                         std::function<void(HttpResponse)> respond);
/// POST /v1/completions.
void OpenAiCompletions(InferenceServer& server, HttpRequest request, const PathParams& path,
                       std::function<void(HttpResponse)> respond);
/// POST /v1/chat/completions.
void OpenAiChatCompletions(InferenceServer& server, HttpRequest request, const PathParams& path,
                           std::function<void(HttpResponse)> respond);
/// POST /v1/embeddings.
void OpenAiEmbeddings(InferenceServer& server, HttpRequest request, const PathParams& path,
                      std::function<void(HttpResponse)> respond);

/// `status` as OpenAI's error response (its HTTP code, OpenAI's body).
HttpResponse OpenAiError(const Status& status, const std::string& param = "",
                         const std::string& code = "");

}  // namespace manypy
