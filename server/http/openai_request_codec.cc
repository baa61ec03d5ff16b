#include "server/http/openai_request_codec.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <algorithm>
#include <utility>

#include "common/datatype.h"
#include "server/http/json_body.h"
#include "server/http/tensor_json.h"

namespace manypy {
namespace {

using Value = rapidjson::Value;

// The fields each route reads; any other is refused, as a typo must not pass.
const std::vector<std::string>& KnownFields(const std::string& route) {
  static const std::vector<std::string> completions = {
      "model", "prompt", "max_tokens", "temperature", "top_p", "stop", "seed", "stream",
      "stream_options", "n", "best_of", "echo", "logprobs", "suffix", "logit_bias",
      "presence_penalty", "frequency_penalty", "user"};
  static const std::vector<std::string> chat = {
      "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
      "seed", "stream", "stream_options", "n", "logprobs", "top_logprobs", "logit_bias",
      "presence_penalty", "frequency_penalty", "user", "metadata", "store", "tools",
      "tool_choice", "functions", "function_call", "response_format", "parallel_tool_calls"};
  static const std::vector<std::string> embeddings = {"model", "input", "encoding_format",
                                                      "dimensions", "user"};
  if (route == kChatRoute) return chat;
  if (route == kEmbeddingsRoute) return embeddings;
  return completions;
}

bool IsZero(const Value& v) { return v.IsNumber() && v.GetDouble() == 0.0; }
bool IsOne(const Value& v) { return v.IsInt64() && v.GetInt64() == 1; }

// Whether `v` is the neutral value of a field manypy does not do (so sending it is harmless).
bool Neutral(const std::string& field, const Value& v) {
  if (v.IsNull()) return true;
  if (field == "n" || field == "best_of") return IsOne(v);
  if (field == "echo" || field == "logprobs") return v.IsBool() && !v.GetBool();
  if (field == "presence_penalty" || field == "frequency_penalty" || field == "top_logprobs")
    return IsZero(v);
  if (field == "suffix") return v.IsString() && v.GetStringLength() == 0;
  if (field == "logit_bias") return v.IsObject() && v.MemberCount() == 0;
  if (field == "tools" || field == "functions") return v.IsArray() && v.Empty();
  if (field == "tool_choice" || field == "function_call")
    return v.IsString() && std::string(v.GetString()) == "none";
  if (field == "response_format") {
    return v.IsObject() && v.HasMember("type") && v["type"].IsString() &&
           std::string(v["type"].GetString()) == "text";
  }
  return true;
}

std::string Text(const Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

std::string JsonOf(const Value& v) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  v.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

Status Bad(std::string* param, const std::string& field, const std::string& message) {
  *param = field;
  return InvalidArgument(message);
}

// A string, or (`many`) a list of strings; a list of one for `prompt`.
Status Strings(const Value& v, const std::string& field, size_t most, std::vector<std::string>* out,
               std::string* param) {
  if (v.IsString()) {
    out->push_back(Text(v));
    return Status::Ok();
  }
  if (v.IsArray()) {
    for (const auto& e : v.GetArray()) {
      if (!e.IsString()) {
        return Bad(param, field, "'" + field + "' must be a string or a list of strings "
                                 "(token ids are not accepted: the model tokenizes its text)");
      }
      out->push_back(Text(e));
    }
    if (out->size() <= most && !(field != "stop" && out->empty())) return Status::Ok();
    return Bad(param, field, "'" + field + "' holds " + std::to_string(out->size()) +
                                 " strings; at most " + std::to_string(most) +
                                 (field == "stop" ? "" : ", at least 1") + " are accepted");
  }
  return Bad(param, field, "'" + field + "' must be a string or a list of strings");
}

// One model input: `values` (JSON) packed as `input`'s datatype, shaped
// `shape` padded with leading 1s up to the input's rank.
Status AddInput(const inference::ModelMetadataResponse::TensorMetadata& input, const Value& values,
                std::vector<int64_t> shape, const std::string& field,
                inference::ModelInferRequest* wire, std::string* param) {
  const DatatypeInfo* dt = FindDatatype(input.datatype());
  if (dt == nullptr) return Internal("input '" + input.name() + "' has unknown datatype");
  std::string raw;
  size_t count = 0;
  Status packed = JsonToRaw("'" + field + "'", *dt, values, &raw, &count);
  if (!packed.ok()) return Bad(param, field, packed.message());
  while (shape.size() < static_cast<size_t>(input.shape_size())) shape.insert(shape.begin(), 1);
  auto* tensor = wire->add_inputs();
  tensor->set_name(input.name());
  tensor->set_datatype(input.datatype());
  for (int64_t d : shape) tensor->add_shape(d);
  wire->add_raw_input_contents(std::move(raw));
  return Status::Ok();
}


Value Str(const std::string& s, rapidjson::Document::AllocatorType& a) {
  return Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), a);
}

}  // namespace

Status DecodeOpenAiCall(std::string_view body, const std::string& route, rapidjson::Document* doc,
                        OpenAiCall* call, std::string* param) {
  call->route = route;
  MANYPY_RETURN_IF_ERROR(ParseJsonBody(body, "the request body", doc));
  if (!doc->IsObject()) return InvalidArgument("the request body is not a JSON object");
  const std::vector<std::string>& known = KnownFields(route);
  for (const auto& member : doc->GetObject()) {
    const std::string field = Text(member.name);
    if (std::find(known.begin(), known.end(), field) == known.end()) {
      return Bad(param, field, "unknown parameter '" + field + "' for /v1/" + route);
    }
    if (!Neutral(field, member.value)) {
      return Bad(param, field, "'" + field + "' " + JsonOf(member.value) +
                                   " is not supported by manypy" +
                                   (field == "n" || field == "best_of" ? " (only 1 is)" : ""));
    }
  }
  if (!doc->HasMember("model") || !(*doc)["model"].IsString()) {
    return Bad(param, "model", "'model' (a model's name, a string) is required");
  }
  call->model = Text((*doc)["model"]);
  if (doc->HasMember("stream") && !(*doc)["stream"].IsNull()) {
    if (!(*doc)["stream"].IsBool()) return Bad(param, "stream", "'stream' must be true or false");
    call->stream = (*doc)["stream"].GetBool();
  }
  if (doc->HasMember("stream_options") && !(*doc)["stream_options"].IsNull()) {
    const Value& options = (*doc)["stream_options"];
    if (!call->stream) {
      return Bad(param, "stream_options", "'stream_options' is only allowed when 'stream' is true");
    }
    if (!options.IsObject()) return Bad(param, "stream_options", "'stream_options' must be an object");
    for (const auto& o : options.GetObject()) {
      if (Text(o.name) != "include_usage" || !o.value.IsBool()) {
        return Bad(param, "stream_options", "'stream_options' takes only include_usage (true or false)");
      }
      call->include_usage = o.value.GetBool();
    }
  }
  if (doc->HasMember("encoding_format") && !(*doc)["encoding_format"].IsNull()) {
    const Value& format = (*doc)["encoding_format"];
    std::string f = format.IsString() ? Text(format) : "";
    if (f != "float" && f != "base64") {
      return Bad(param, "encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
    }
    call->base64 = f == "base64";
  }
  if (doc->HasMember("dimensions") && !(*doc)["dimensions"].IsNull()) {
    const Value& d = (*doc)["dimensions"];
    if (!d.IsInt64() || d.GetInt64() < 1) {
      return Bad(param, "dimensions", "'dimensions' must be an integer >= 1");
    }
    call->dimensions = d.GetInt64();
  }
  return Status::Ok();
}

Status DecodeOpenAiInputs(const rapidjson::Document& doc, OpenAiCall* call, const OpenAiSpec& spec,
                          const inference::ModelMetadataResponse& metadata,
                          inference::ModelInferRequest* wire, std::string* param) {
  wire->set_model_name(metadata.name());
  const std::string text_field = call->route == kChatRoute        ? "messages"
                                 : call->route == kEmbeddingsRoute ? "input"
                                                                   : "prompt";
  if (!doc.HasMember(text_field.c_str()) || doc[text_field.c_str()].IsNull()) {
    return Bad(param, text_field, "'" + text_field + "' is required");
  }
  // max_completion_tokens is chat's newer name for max_tokens.
  const Value* max_tokens = nullptr;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (doc.HasMember(name) && !doc[name].IsNull()) max_tokens = &doc[name];
  }
  // Every request field the route reads: the value sent, or null.
  auto sent = [&](const std::string& field) -> const Value* {
    if (field == "max_tokens") return max_tokens;
    if (!doc.HasMember(field.c_str()) || doc[field.c_str()].IsNull()) return nullptr;
    return &doc[field.c_str()];
  };
  for (const char* field : {"max_tokens", "temperature", "top_p", "stop", "seed"}) {
    if (sent(field) != nullptr && OpenAiSpec::Mapped(spec.inputs, field).empty()) {
      return Bad(param, field, "model '" + metadata.name() + "' does not take '" + field +
                                   "' (its manifest's openai.inputs does not map it)");
    }
  }
  rapidjson::Document scratch;
  auto& a = scratch.GetAllocator();
  for (const auto& [field, tensor] : spec.inputs) {
    const inference::ModelMetadataResponse::TensorMetadata* input = nullptr;
    for (const auto& in : metadata.inputs()) {
      if (in.name() == tensor) input = &in;
    }
    if (input == nullptr) return Internal("model '" + metadata.name() + "' has no input '" + tensor + "'");
    const Value* v = sent(field);
    Value values(rapidjson::kArrayType);
    std::vector<int64_t> shape;
    if (field != text_field && (field == "prompt" || field == "messages" || field == "input")) {
      // Another route's text (a model serving several): empty, as the convention says.
      if (field != "input") values.PushBack(Str("", a), a);
      shape = {field == "input" ? 0 : 1};
    } else if (field == "prompt" || field == "input" || field == "stop") {
      std::vector<std::string> strings;
      if (v != nullptr) {
        MANYPY_RETURN_IF_ERROR(Strings(*v, field, field == "stop" ? 4 : field == "prompt" ? 1 : 2048,
                                       &strings, param));
      }
      for (const std::string& s : strings) values.PushBack(Str(s, a), a);
      shape = {static_cast<int64_t>(strings.size())};
      if (field == "input") call->inputs = strings.size();
    } else if (field == "messages") {
      if (!v->IsArray() || v->Empty()) {
        return Bad(param, field, "'messages' must be a non-empty list of messages");
      }
      for (const auto& m : v->GetArray()) {
        if (!m.IsObject() || !m.HasMember("role") || !m["role"].IsString()) {
          return Bad(param, field, "each of 'messages' must be an object with a 'role'");
        }
      }
      values.PushBack(Str(JsonOf(*v), a), a);
      shape = {1};
    } else {
      // The ranges OpenAI's API reference gives.
      const bool integer = field == "max_tokens" || field == "seed";
      const double lo = field == "seed" ? -9.2e18 : 0;
      const double hi = field == "temperature" ? 2 : field == "top_p" ? 1 : 9.2e18;
      const char* range = field == "temperature" ? "a number from 0 to 2"
                          : field == "top_p"     ? "a number from 0 to 1"
                          : field == "seed"      ? "an integer"
                                                 : "an integer >= 0";
      if (v == nullptr) {
        if (field == "temperature" || field == "top_p") values.PushBack(1.0, a);
        else values.PushBack(int64_t{-1}, a);
      } else {
        if ((integer && !v->IsInt64()) || !v->IsNumber() || v->GetDouble() < lo ||
            v->GetDouble() > hi) {
          const bool newer_name = field == "max_tokens" && doc.HasMember("max_completion_tokens");
          const std::string named = newer_name ? "max_completion_tokens" : field;
          return Bad(param, named, "'" + named + "' must be " + range + ", got " + JsonOf(*v));
        }
        values.PushBack(Value(*v, a), a);
      }
      shape = {1};
    }
    MANYPY_RETURN_IF_ERROR(AddInput(*input, values, shape, field, wire, param));
  }
  return Status::Ok();
}

}  // namespace manypy
