#include "server/http/openai_answer_codec.h"

#include <cstring>
#include <utility>

#include "common/datatype.h"
#include "server/http/http_status.h"
#include "server/http/proto_json.h"
#include "server/http/tensor_json.h"

namespace manypy {
namespace {

using Value = rapidjson::Value;

std::string Text(const Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

// An output of `response` by name as a flat JSON array in `doc`; null when absent.
StatusOr<bool> Output(const inference::ModelInferResponse& response, const std::string& name,
                      rapidjson::Document* doc) {
  doc->SetArray();
  for (int i = 0; i < response.outputs_size(); ++i) {
    if (response.outputs(i).name() != name) continue;
    const DatatypeInfo* dt = FindDatatype(response.outputs(i).datatype());
    if (dt == nullptr || i >= response.raw_output_contents_size()) {
      return Internal("output '" + name + "' of model '" + response.model_name() +
                      "' has no raw contents");
    }
    MANYPY_RETURN_IF_ERROR(RawToJson(*dt, response.raw_output_contents(i), doc, doc->GetAllocator()));
    return true;
  }
  return false;
}

// The first element of a mapped output as text or an integer (`*present` false when unmapped).
Status FirstOf(const inference::ModelInferResponse& response, const OpenAiSpec& spec,
               const std::string& piece, Value* out, rapidjson::Document* doc, bool* present) {
  *present = false;
  const std::string name = OpenAiSpec::Mapped(spec.outputs, piece);
  if (name.empty()) return Status::Ok();
  StatusOr<bool> found = Output(response, name, doc);
  if (!found.ok()) return found.status();
  if (!*found || doc->Empty()) {
    return Internal("model '" + response.model_name() + "' gave no '" + name +
                    "' (its openai " + piece + ") in a response");
  }
  *out = (*doc)[0];
  *present = true;
  return Status::Ok();
}

std::string Base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    uint32_t n = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(n >> s) & 63];
  }
  if (i < bytes.size()) {
    uint32_t n = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

Value Str(const std::string& s, rapidjson::Document::AllocatorType& a) {
  return Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
}

// The members every answer and chunk opens with.
rapidjson::Document AnswerHead(const std::string& id, const char* object, int64_t created,
                               const std::string& model) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("id", Str(id, a), a);
  doc.AddMember("object", Str(object, a), a);
  doc.AddMember("created", created, a);
  doc.AddMember("model", Str(model, a), a);
  return doc;
}

Value Usage(int64_t prompt, int64_t completion, rapidjson::Document::AllocatorType& a) {
  Value usage(rapidjson::kObjectType);
  usage.AddMember("prompt_tokens", prompt, a);
  usage.AddMember("completion_tokens", completion, a);
  usage.AddMember("total_tokens", prompt + completion, a);
  return usage;
}

}  // namespace

OpenAiAnswer::OpenAiAnswer(OpenAiCall call, OpenAiSpec spec, std::string id, int64_t created)
    : call_(std::move(call)), spec_(std::move(spec)), id_(std::move(id)), created_(created) {}

StatusOr<std::string> OpenAiAnswer::Add(const inference::ModelInferResponse& response) {
  rapidjson::Document scratch;
  Value value;
  bool present = false;
  MANYPY_RETURN_IF_ERROR(FirstOf(response, spec_, "text", &value, &scratch, &present));
  std::string piece = present && value.IsString() ? Text(value) : "";
  MANYPY_RETURN_IF_ERROR(FirstOf(response, spec_, "finish_reason", &value, &scratch, &present));
  if (present && value.IsString() && value.GetStringLength() > 0) finish_reason_ = Text(value);
  MANYPY_RETURN_IF_ERROR(FirstOf(response, spec_, "prompt_tokens", &value, &scratch, &present));
  if (present && value.IsInt64()) prompt_tokens_ = value.GetInt64();
  MANYPY_RETURN_IF_ERROR(FirstOf(response, spec_, "completion_tokens", &value, &scratch, &present));
  if (present && value.IsInt64()) {
    completion_tokens_ += value.GetInt64();
  } else if (!piece.empty()) {
    completion_tokens_ += 1;
  }
  if (piece.empty()) return std::string();
  text_ += piece;
  return Chunk(piece, "");
}

std::string OpenAiAnswer::Chunk(const std::string& text, const std::string& finish_reason) {
  const bool chat = call_.route == kChatRoute;
  rapidjson::Document doc =
      AnswerHead(id_, chat ? "chat.completion.chunk" : "text_completion", created_, call_.model);
  auto& a = doc.GetAllocator();
  Value choice(rapidjson::kObjectType);
  choice.AddMember("index", 0, a);
  if (chat) {
    Value delta(rapidjson::kObjectType);
    if (!role_sent_) delta.AddMember("role", "assistant", a);
    if (!text.empty() || finish_reason.empty()) delta.AddMember("content", Str(text, a), a);
    choice.AddMember("delta", delta, a);
  } else {
    choice.AddMember("text", Str(text, a), a);
  }
  choice.AddMember("logprobs", Value(), a);
  choice.AddMember("finish_reason", finish_reason.empty() ? Value() : Str(finish_reason, a), a);
  Value choices(rapidjson::kArrayType);
  choices.PushBack(choice, a);
  doc.AddMember("choices", choices, a);
  if (call_.include_usage) doc.AddMember("usage", Value(), a);
  role_sent_ = true;
  return JsonText(doc);
}

std::vector<std::string> OpenAiAnswer::FinishChunks() {
  std::vector<std::string> chunks = {Chunk("", finish_reason_.empty() ? "stop" : finish_reason_)};
  if (call_.include_usage) {
    rapidjson::Document doc = AnswerHead(
        id_, call_.route == kChatRoute ? "chat.completion.chunk" : "text_completion", created_,
        call_.model);
    auto& a = doc.GetAllocator();
    doc.AddMember("choices", Value(rapidjson::kArrayType), a);
    doc.AddMember("usage", Usage(prompt_tokens_, completion_tokens_, a), a);
    chunks.push_back(JsonText(doc));
  }
  return chunks;
}

std::string OpenAiAnswer::Whole() const {
  const bool chat = call_.route == kChatRoute;
  rapidjson::Document doc =
      AnswerHead(id_, chat ? "chat.completion" : "text_completion", created_, call_.model);
  auto& a = doc.GetAllocator();
  Value choice(rapidjson::kObjectType);
  choice.AddMember("index", 0, a);
  if (chat) {
    Value message(rapidjson::kObjectType);
    message.AddMember("role", "assistant", a);
    message.AddMember("content", Str(text_, a), a);
    choice.AddMember("message", message, a);
  } else {
    choice.AddMember("text", Str(text_, a), a);
  }
  choice.AddMember("logprobs", Value(), a);
  choice.AddMember("finish_reason", Str(finish_reason_.empty() ? "stop" : finish_reason_, a), a);
  Value choices(rapidjson::kArrayType);
  choices.PushBack(choice, a);
  doc.AddMember("choices", choices, a);
  doc.AddMember("usage", Usage(prompt_tokens_, completion_tokens_, a), a);
  return JsonText(doc);
}

StatusOr<std::string> EncodeEmbeddings(const OpenAiCall& call, const OpenAiSpec& spec,
                                       const inference::ModelInferResponse& response,
                                       std::string* param) {
  const std::string name = OpenAiSpec::Mapped(spec.outputs, "embedding");
  rapidjson::Document values;
  StatusOr<bool> found = Output(response, name, &values);
  if (!found.ok()) return found.status();
  if (!*found) return Internal("model '" + call.model + "' gave no '" + name + "' (its openai embedding)");
  const size_t rows = call.inputs;
  if (rows == 0 || values.Size() % rows != 0) {
    return Internal("model '" + call.model + "' gave " + std::to_string(values.Size()) +
                    " numbers in '" + name + "' for " + std::to_string(rows) +
                    " inputs: expected one row per input");
  }
  const size_t width = values.Size() / rows;
  if (call.dimensions > 0 && static_cast<size_t>(call.dimensions) != width) {
    *param = "dimensions";
    return InvalidArgument("model '" + call.model + "' makes embeddings of " +
                           std::to_string(width) + " dimensions, not " +
                           std::to_string(call.dimensions));
  }
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("object", "list", a);
  Value data(rapidjson::kArrayType);
  for (size_t r = 0; r < rows; ++r) {
    Value item(rapidjson::kObjectType);
    item.AddMember("object", "embedding", a);
    item.AddMember("index", static_cast<uint64_t>(r), a);
    if (call.base64) {
      std::string bytes(width * sizeof(float), '\0');
      for (size_t c = 0; c < width; ++c) {
        float f = static_cast<float>(values[r * width + c].GetDouble());
        std::memcpy(&bytes[c * sizeof(float)], &f, sizeof(float));  // little-endian host
      }
      item.AddMember("embedding", Str(Base64(bytes), a), a);
    } else {
      Value row(rapidjson::kArrayType);
      for (size_t c = 0; c < width; ++c) row.PushBack(values[r * width + c].GetDouble(), a);
      item.AddMember("embedding", row, a);
    }
    data.PushBack(item, a);
  }
  doc.AddMember("data", data, a);
  doc.AddMember("model", Str(call.model, a), a);
  int64_t prompt_tokens = 0;
  rapidjson::Document scratch;
  Value value;
  bool present = false;
  MANYPY_RETURN_IF_ERROR(FirstOf(response, spec, "prompt_tokens", &value, &scratch, &present));
  if (present && value.IsInt64()) prompt_tokens = value.GetInt64();
  Value usage(rapidjson::kObjectType);
  usage.AddMember("prompt_tokens", prompt_tokens, a);
  usage.AddMember("total_tokens", prompt_tokens, a);
  doc.AddMember("usage", usage, a);
  return JsonText(doc);
}

std::string OpenAiErrorJson(const Status& status, const std::string& param,
                            const std::string& code) {
  const int http = ToHttpStatus(status);
  const char* type = http == 401   ? "authentication_error"
                     : http == 403 ? "permission_error"
                     : http == 429 ? "rate_limit_error"
                     : http >= 500 || http == 499 ? "server_error"
                                                  : "invalid_request_error";
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  Value error(rapidjson::kObjectType);
  error.AddMember("message", Str(status.message(), a), a);
  error.AddMember("type", Str(type, a), a);
  error.AddMember("param", param.empty() ? Value() : Str(param, a), a);
  error.AddMember("code", code.empty() ? Value() : Str(code, a), a);
  doc.AddMember("error", error, a);
  return JsonText(doc);
}

}  // namespace manypy
