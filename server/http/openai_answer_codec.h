// A model's responses as OpenAI API answers (docs/text-generation.md):
// completion and chat completion chunks or whole answers (OpenAiAnswer),
// embeddings, and OpenAI's error body. OpenAiAnswer belongs to one request
// and is used by one thread at a time; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "package_format/openai_spec.h"
#include "proto/grpc_service.pb.h"
#include "server/http/openai_request_codec.h"

namespace manypy {

/// One completion or chat completion being answered: takes the model's
/// responses in order and gives the stream's chunks or the whole answer.
class OpenAiAnswer {
 public:
  OpenAiAnswer(OpenAiCall call, OpenAiSpec spec, std::string id, int64_t created);

  /// Reads one response's text, finish reason and token counts; returns the
  /// chunk to stream for it ("" when it carries no text). INTERNAL, naming
  /// the model and the output, when a mapped output is missing or malformed.
  StatusOr<std::string> Add(const inference::ModelInferResponse& response);
  /// The stream's last chunks after the model's last response: the finish
  /// reason's, then the usage's when asked for (without "[DONE]").
  std::vector<std::string> FinishChunks();
  /// The whole non-streamed answer (text joined, finish reason, usage).
  std::string Whole() const;

 private:
  /// A chunk's JSON with `text` (chat: as a delta) and `finish_reason` ("" = null).
  std::string Chunk(const std::string& text, const std::string& finish_reason);

  const OpenAiCall call_;
  const OpenAiSpec spec_;
  const std::string id_;
  const int64_t created_;
  std::string text_;
  std::string finish_reason_;
  int64_t prompt_tokens_ = 0;
  int64_t completion_tokens_ = 0;
  bool role_sent_ = false;  ///< chat: the first delta carries the role
};

/// The /v1/embeddings answer from the model's one response. INTERNAL when
/// the embedding output is missing or not one row per input; INVALID_ARGUMENT
/// (param "dimensions") when the rows are not `call.dimensions` long.
StatusOr<std::string> EncodeEmbeddings(const OpenAiCall& call, const OpenAiSpec& spec,
                                       const inference::ModelInferResponse& response,
                                       std::string* param);

/// OpenAI's error body, {"error": {"message", "type", "param", "code"}}:
/// `type` from `status`'s code, `param` and `code` null when empty.
std::string OpenAiErrorJson(const Status& status, const std::string& param,
                            const std::string& code);

}  // namespace manypy
