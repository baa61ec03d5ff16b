// An OpenAI API request (docs/text-generation.md) as the protocol's request:
// the fields every route reads (model, stream, ...) and those manypy refuses,
// then the model's inputs filled as its manifest's `openai` field maps them.
// Pure functions; thread-safe.
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "package_format/openai_spec.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// What a request asks beside the model's inputs.
struct OpenAiCall {
  std::string route;  ///< kCompletionsRoute, kChatRoute or kEmbeddingsRoute
  std::string model;
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  bool base64 = false;         ///< embeddings: encoding_format "base64"
  int64_t dimensions = 0;      ///< embeddings: asked for; 0 = the model's
  size_t inputs = 0;           ///< embeddings: the strings to embed
};

/// Parses `body` for `route` into `*doc` and `*call`: `model`, `stream`,
/// `stream_options`, and every field the route knows but manypy does not do
/// (n other than 1, logprobs, tools, ...) refused. INVALID_ARGUMENT with the
/// field at fault in `*param` ("" for the body as a whole).
Status DecodeOpenAiCall(std::string_view body, const std::string& route, rapidjson::Document* doc,
                        OpenAiCall* call, std::string* param);

/// Fills `wire` (model `metadata.name()`, its newest version) with the model's
/// inputs from `doc`'s fields as `spec` maps them, defaults for those the
/// request leaves out; a field set that the model does not map is refused.
/// INVALID_ARGUMENT with the field at fault in `*param`.
Status DecodeOpenAiInputs(const rapidjson::Document& doc, OpenAiCall* call, const OpenAiSpec& spec,
                          const inference::ModelMetadataResponse& metadata,
                          inference::ModelInferRequest* wire, std::string* param);

}  // namespace manypy
