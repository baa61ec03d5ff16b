// The OpenAI JSON codec as functions: refusals name their parameter, request
// fields fill the mapped inputs (defaults for those left out, a leading batch
// dimension where the model has one), responses become chunks, whole answers
// and embeddings.
#include "server/http/openai_answer_codec.h"
#include "server/http/openai_request_codec.h"

#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstring>
#include <string>

namespace manypy {
namespace {

OpenAiSpec Spec() {
  OpenAiSpec spec;
  spec.routes = {kCompletionsRoute, kChatRoute};
  spec.inputs = {{"max_tokens", "LIMIT"}, {"messages", "CHAT"}, {"prompt", "PROMPT"},
                 {"stop", "STOP"}, {"temperature", "TEMP"}};
  spec.outputs = {{"finish_reason", "WHY"}, {"text", "TEXT"}};
  return spec;
}

inference::ModelMetadataResponse Metadata(bool batched) {
  inference::ModelMetadataResponse m;
  m.set_name("writer");
  auto add = [&](const char* name, const char* datatype, int64_t dim) {
    auto* t = m.add_inputs();
    t->set_name(name);
    t->set_datatype(datatype);
    if (batched) t->add_shape(-1);
    t->add_shape(dim);
  };
  add("PROMPT", "BYTES", 1);
  add("CHAT", "BYTES", 1);
  add("LIMIT", "INT32", 1);
  add("STOP", "BYTES", -1);
  add("TEMP", "FP64", 1);
  return m;
}

struct Decoded {
  Status status;
  std::string param;
  OpenAiCall call;
  inference::ModelInferRequest wire;
};

Decoded Decode(const std::string& route, const std::string& body, bool batched = false) {
  Decoded d;
  rapidjson::Document doc;
  d.status = DecodeOpenAiCall(body, route, &doc, &d.call, &d.param);
  if (d.status.ok()) {
    d.status = DecodeOpenAiInputs(doc, &d.call, Spec(), Metadata(batched), &d.wire, &d.param);
  }
  return d;
}

const inference::ModelInferRequest::InferInputTensor* Input(const Decoded& d, const char* name,
                                                            std::string* raw) {
  for (int i = 0; i < d.wire.inputs_size(); ++i) {
    if (d.wire.inputs(i).name() == name) {
      *raw = d.wire.raw_input_contents(i);
      return &d.wire.inputs(i);
    }
  }
  return nullptr;
}

std::string Bytes(const std::string& s) {  // one BYTES element
  uint32_t n = static_cast<uint32_t>(s.size());
  return std::string(reinterpret_cast<const char*>(&n), 4) + s;
}

TEST(OpenAiCodecTest, RefusalsNameTheParameter) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"model":"writer","prompt":"a","n":2})", "n", "'n' 2 is not supported by manypy (only 1 is)"},
      {R"({"model":"writer","prompt":"a","echo":true})", "echo", "'echo' true is not supported"},
      {R"({"model":"writer","prompt":"a","presence_penalty":0.5})", "presence_penalty", "not supported"},
      {R"({"model":"writer","prompt":"a","promt":"b"})", "promt", "unknown parameter 'promt' for /v1/completions"},
      {R"({"prompt":"a"})", "model", "'model' (a model's name, a string) is required"},
      {R"({"model":"writer","prompt":"a","stream_options":{"include_usage":true}})", "stream_options",
       "only allowed when 'stream' is true"},
      {R"({"model":"writer","prompt":"a","stream":"yes"})", "stream", "'stream' must be true or false"},
      {R"({"model":"writer","prompt":["a","b"]})", "prompt", "at most 1"},
      {R"({"model":"writer","prompt":[1,2]})", "prompt", "token ids are not accepted"},
      {R"({"model":"writer"})", "prompt", "'prompt' is required"},
      {R"({"model":"writer","prompt":"a","max_tokens":1.5})", "max_tokens", "'max_tokens' must be an integer >= 0, got 1.5"},
      {R"({"model":"writer","prompt":"a","temperature":3})", "temperature", "'temperature' must be a number from 0 to 2, got 3"},
      {R"({"model":"writer","prompt":"a","stop":["1","2","3","4","5"]})", "stop", "at most 4"},
      {R"({"model":"writer","prompt":"a","seed":1})", "seed", "model 'writer' does not take 'seed'"},
      {R"({"model":"writer","prompt":"a","top_p":0.5})", "top_p", "does not take 'top_p'"},
  };
  for (const Case& c : cases) {
    Decoded d = Decode(kCompletionsRoute, c.body);
    EXPECT_EQ(d.status.code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(d.param, c.param) << c.body;
    EXPECT_NE(d.status.message().find(c.says), std::string::npos) << c.body << ": " << d.status.message();
  }
  Decoded d = Decode(kCompletionsRoute, "{");
  EXPECT_EQ(d.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(d.param, "");
  EXPECT_NE(d.status.message().find("not valid JSON"), std::string::npos);
  d = Decode(kChatRoute, R"({"model":"writer","messages":[{"content":"no role"}]})");
  EXPECT_EQ(d.param, "messages");
  d = Decode(kChatRoute, R"({"model":"writer","messages":[{"role":"user","content":"a"}],"tools":[{}]})");
  EXPECT_EQ(d.param, "tools");
  d = Decode(kChatRoute, R"({"model":"writer","messages":[{"role":"user","content":"a"}],
                            "tools":[],"tool_choice":"none","response_format":{"type":"text"},
                            "logprobs":false,"n":1,"user":"u","store":false})");
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
}

TEST(OpenAiCodecTest, FieldsFillTheirInputsAndDefaultsTheRest) {
  Decoded d = Decode(kCompletionsRoute,
                     R"({"model":"writer","prompt":"héllo","max_tokens":7,"stream":true,
                         "stream_options":{"include_usage":true},"stop":"!"})");
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.call.model, "writer");
  EXPECT_TRUE(d.call.stream);
  EXPECT_TRUE(d.call.include_usage);
  EXPECT_EQ(d.wire.model_name(), "writer");
  ASSERT_EQ(d.wire.inputs_size(), 5);
  std::string raw;
  ASSERT_NE(Input(d, "PROMPT", &raw), nullptr);
  EXPECT_EQ(raw, Bytes("héllo"));
  EXPECT_EQ(Input(d, "CHAT", &raw)->shape(0), 1);
  EXPECT_EQ(raw, Bytes(""));  // another route's text: empty
  EXPECT_EQ(Input(d, "LIMIT", &raw)->datatype(), "INT32");
  int32_t limit = 0;
  std::memcpy(&limit, raw.data(), 4);
  EXPECT_EQ(limit, 7);
  EXPECT_EQ(Input(d, "STOP", &raw)->shape(0), 1);
  EXPECT_EQ(raw, Bytes("!"));
  double temperature = 0;
  ASSERT_EQ(Input(d, "TEMP", &raw)->datatype(), "FP64");
  std::memcpy(&temperature, raw.data(), 8);
  EXPECT_EQ(temperature, 1.0);  // OpenAI's default

  // Left out: max_tokens -1, stop none; a batched model gets a batch of one.
  d = Decode(kChatRoute, R"({"model":"writer","messages":[{"role":"user","content":"hi"}]})",
             /*batched=*/true);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  const auto* stop = Input(d, "STOP", &raw);
  EXPECT_EQ(std::vector<int64_t>(stop->shape().begin(), stop->shape().end()),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(raw, "");
  Input(d, "LIMIT", &raw);
  std::memcpy(&limit, raw.data(), 4);
  EXPECT_EQ(limit, -1);
  const auto* chat = Input(d, "CHAT", &raw);
  EXPECT_EQ(chat->shape_size(), 2);
  EXPECT_EQ(raw, Bytes(R"([{"role":"user","content":"hi"}])"));
}

inference::ModelInferResponse Response(const std::string& text, const std::string& why) {
  inference::ModelInferResponse r;
  r.set_model_name("writer");
  for (auto [name, value] : {std::pair{"TEXT", text}, std::pair{"WHY", why}}) {
    auto* out = r.add_outputs();
    out->set_name(name);
    out->set_datatype("BYTES");
    out->add_shape(1);
    r.add_raw_output_contents(Bytes(value));
  }
  return r;
}

TEST(OpenAiCodecTest, ResponsesBecomeChunksAndAWholeAnswer) {
  OpenAiCall call;
  call.route = kChatRoute;
  call.model = "writer";
  call.include_usage = true;
  OpenAiAnswer answer(call, Spec(), "chatcmpl-1", 42);
  StatusOr<std::string> first = answer.Add(Response("he", ""));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first,
            R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":42,"model":"writer",)"
            R"("choices":[{"index":0,"delta":{"role":"assistant","content":"he"},"logprobs":null,)"
            R"("finish_reason":null}],"usage":null})");
  StatusOr<std::string> second = answer.Add(Response("y", ""));
  EXPECT_EQ(second->find("role"), std::string::npos);
  StatusOr<std::string> none = answer.Add(Response("", "length"));
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");  // no text: no chunk
  std::vector<std::string> last = answer.FinishChunks();
  ASSERT_EQ(last.size(), 2u);
  EXPECT_NE(last[0].find(R"("delta":{},"logprobs":null,"finish_reason":"length")"), std::string::npos)
      << last[0];
  EXPECT_NE(last[1].find(R"("choices":[],"usage":{"prompt_tokens":0,"completion_tokens":2,"total_tokens":2})"),
            std::string::npos)
      << last[1];
  EXPECT_EQ(answer.Whole(),
            R"({"id":"chatcmpl-1","object":"chat.completion","created":42,"model":"writer",)"
            R"("choices":[{"index":0,"message":{"role":"assistant","content":"hey"},)"
            R"("logprobs":null,"finish_reason":"length"}],)"
            R"("usage":{"prompt_tokens":0,"completion_tokens":2,"total_tokens":2}})");

  // A response without a mapped output is the model's fault, named.
  inference::ModelInferResponse bare;
  bare.set_model_name("writer");
  StatusOr<std::string> bad = answer.Add(bare);
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_NE(bad.status().message().find("'TEXT' (its openai text)"), std::string::npos);
}

TEST(OpenAiCodecTest, EmbeddingsAsFloatsOrBase64) {
  OpenAiSpec spec;
  spec.routes = {kEmbeddingsRoute};
  spec.inputs = {{"input", "IN"}};
  spec.outputs = {{"embedding", "E"}};
  inference::ModelInferResponse r;
  auto* out = r.add_outputs();
  out->set_name("E");
  out->set_datatype("FP32");
  out->add_shape(2);
  out->add_shape(2);
  float values[] = {1.0f, 0.5f, -2.0f, 0.0f};
  r.add_raw_output_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  OpenAiCall call;
  call.route = kEmbeddingsRoute;
  call.model = "e";
  call.inputs = 2;
  std::string param;
  StatusOr<std::string> json = EncodeEmbeddings(call, spec, r, &param);
  ASSERT_TRUE(json.ok()) << json.status().ToString();
  EXPECT_EQ(*json,
            R"({"object":"list","data":[{"object":"embedding","index":0,"embedding":[1.0,0.5]},)"
            R"({"object":"embedding","index":1,"embedding":[-2.0,0.0]}],"model":"e",)"
            R"("usage":{"prompt_tokens":0,"total_tokens":0}})");
  call.base64 = true;
  json = EncodeEmbeddings(call, spec, r, &param);
  // 1.0f, 0.5f little-endian: 00 00 80 3f 00 00 00 3f.
  EXPECT_NE(json->find(R"("embedding":"AACAPwAAAD8=")"), std::string::npos) << *json;
  call.dimensions = 3;
  json = EncodeEmbeddings(call, spec, r, &param);
  EXPECT_EQ(json.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(param, "dimensions");
  call.dimensions = 0;
  call.inputs = 3;
  EXPECT_EQ(EncodeEmbeddings(call, spec, r, &param).status().code(), StatusCode::kInternal);
}

TEST(OpenAiCodecTest, ErrorsUseOpenAisBody) {
  EXPECT_EQ(OpenAiErrorJson(InvalidArgument("bad n"), "n", ""),
            R"({"error":{"message":"bad n","type":"invalid_request_error","param":"n","code":null}})");
  EXPECT_EQ(OpenAiErrorJson(NotFound("no m"), "model", "model_not_found"),
            R"({"error":{"message":"no m","type":"invalid_request_error","param":"model",)"
            R"("code":"model_not_found"}})");
  EXPECT_NE(OpenAiErrorJson(Internal("x"), "", "").find(R"("type":"server_error","param":null)"),
            std::string::npos);
  EXPECT_NE(OpenAiErrorJson(Unauthenticated("x"), "", "").find("authentication_error"),
            std::string::npos);
}

}  // namespace
}  // namespace manypy
