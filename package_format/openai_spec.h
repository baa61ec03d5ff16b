// OpenAiSpec: a manifest's `openai` field (docs/text-generation.md): which
// OpenAI routes a model serves, which model input each request field fills
// and which output carries each piece of the answer; the rules that tie it to
// the model's signature. Plain values and pure functions: any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace manypy {

struct TensorSpec;

/// The routes a model may declare, as the manifest names them (the path after /v1/).
inline constexpr const char* kCompletionsRoute = "completions";
inline constexpr const char* kChatRoute = "chat/completions";
inline constexpr const char* kEmbeddingsRoute = "embeddings";

struct OpenAiSpec {
  std::vector<std::string> routes;  ///< empty: the model serves no OpenAI route
  /// Request field ("prompt", "max_tokens", ...) -> model input name, sorted by field.
  std::vector<std::pair<std::string, std::string>> inputs;
  /// Answer piece ("text", "finish_reason", ...) -> model output name, sorted by piece.
  std::vector<std::pair<std::string, std::string>> outputs;

  bool Serves(const std::string& route) const;
  /// The tensor mapped to `field` in `inputs` or `outputs`; "" when none is.
  static const std::string& Mapped(const std::vector<std::pair<std::string, std::string>>& map,
                                   const std::string& field);
  bool operator==(const OpenAiSpec& o) const;
};

/// Why `spec` does not fit a model with `inputs` and `outputs` (shapes
/// without the batch dimension), as {field path under "openai.", problem};
/// {"", ""} when it does. The field path and the problem name the route and
/// the tensor: {"inputs.max_tokens", "route 'completions': input 'MAX_TOKENS'
/// is FP32, expected INT32 or INT64"}.
std::pair<std::string, std::string> OpenAiProblem(const OpenAiSpec& spec,
                                                  const std::vector<TensorSpec>& inputs,
                                                  const std::vector<TensorSpec>& outputs);

}  // namespace manypy
