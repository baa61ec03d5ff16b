// A manifest's `openai` field (docs/text-generation.md): a declaration that
// fits the signature parses and round-trips; each rule broken once is refused
// naming the field, the route and the tensor.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "package_format/manifest.h"

namespace manypy {
namespace {

using json = nlohmann::json;

// A text generator served on completions and chat, as docs/text-generation.md's example.
json Generator() {
  return json::parse(R"({
    "schema_version": 1, "name": "writer", "version": 1, "platform": "manypy_python",
    "entry_point": {"kind": "pickle", "package": "model", "resource": "model.pkl"},
    "inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1]},
               {"name": "MESSAGES", "datatype": "BYTES", "shape": [1]},
               {"name": "MAX_TOKENS", "datatype": "INT64", "shape": [1]},
               {"name": "STOP", "datatype": "BYTES", "shape": [-1]}],
    "outputs": [{"name": "TEXT", "datatype": "BYTES", "shape": [1]},
                {"name": "TOKENS", "datatype": "INT32", "shape": [1]},
                {"name": "VECTORS", "datatype": "FP32", "shape": [-1, 4]}],
    "streaming": true,
    "openai": {"routes": ["completions", "chat/completions"],
               "inputs": {"prompt": "PROMPT", "messages": "MESSAGES",
                          "max_tokens": "MAX_TOKENS", "stop": "STOP"},
               "outputs": {"text": "TEXT", "completion_tokens": "TOKENS"}}})");
}

TEST(OpenAiSpecTest, ADeclarationThatFitsParsesAndRoundTrips) {
  StatusOr<Manifest> m = ParseManifest(Generator().dump(), "writer.mpk");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->openai.Serves("completions"));
  EXPECT_TRUE(m->openai.Serves("chat/completions"));
  EXPECT_FALSE(m->openai.Serves("embeddings"));
  EXPECT_EQ(OpenAiSpec::Mapped(m->openai.inputs, "max_tokens"), "MAX_TOKENS");
  EXPECT_EQ(OpenAiSpec::Mapped(m->openai.outputs, "finish_reason"), "");
  StatusOr<Manifest> again = ParseManifest(ManifestToJson(*m), "writer.mpk");
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << ManifestToJson(*m);
  EXPECT_EQ(*again, *m);
  // Without the field: no routes, and the writer leaves it out.
  json plain = Generator();
  plain.erase("openai");
  m = ParseManifest(plain.dump(), "writer.mpk");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->openai.routes.empty());
  EXPECT_EQ(ManifestToJson(*m).find("openai"), std::string::npos);
}

TEST(OpenAiSpecTest, RefusesEveryRuleBrokenOnce) {
  struct Case {
    const char* what;
    std::function<void(json&)> change;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"no routes", [](json& o) { o["routes"] = json::array(); },
       "field 'openai.routes': must name at least one route"},
      {"unknown route", [](json& o) { o["routes"] = {"completion"}; },
       "field 'openai.routes[0]': unknown route 'completion' (expected completions, "
       "chat/completions or embeddings)"},
      {"route twice", [](json& o) { o["routes"] = {"completions", "completions"}; },
       "field 'openai.routes[1]': route 'completions' is listed twice"},
      {"unknown field", [](json& o) { o["extra"] = 1; }, "field 'openai.extra': unknown field"},
      {"unknown request field", [](json& o) { o["inputs"]["prompts"] = "PROMPT"; },
       "field 'openai.inputs.prompts': unknown field (expected one of prompt, messages, input,"},
      {"no such input", [](json& o) { o["inputs"]["max_tokens"] = "LIMIT"; },
       "field 'openai.inputs.max_tokens': route 'completions': 'LIMIT' is not an input of the "
       "model (its inputs: PROMPT, MESSAGES, MAX_TOKENS and STOP)"},
      {"mistyped input", [](json& o) { o["inputs"]["max_tokens"] = "STOP"; },
       "field 'openai.inputs.max_tokens': route 'completions': input 'STOP' is BYTES, expected "
       "INT32 or INT64"},
      {"mapped twice", [](json& o) { o["inputs"]["prompt"] = "MESSAGES"; },
       "route 'completions': input 'MESSAGES' is mapped twice"},
      {"missing prompt", [](json& o) { o["inputs"].erase("prompt"); },
       "field 'openai.inputs.prompt': route 'completions' needs the input 'prompt' mapped"},
      {"missing messages", [](json& o) { o["inputs"].erase("messages"); },
       "field 'openai.inputs.messages': route 'chat/completions' needs the input 'messages' mapped"},
      {"missing text", [](json& o) { o["outputs"].erase("text"); },
       "field 'openai.outputs.text': route 'completions' needs the output 'text' mapped"},
      {"embeddings without embedding", [](json& o) { o["routes"].push_back("embeddings"); },
       "needs the input 'input' mapped"},
      {"mistyped output",
       [](json& o) {
         o["outputs"].erase("completion_tokens");
         o["outputs"]["finish_reason"] = "TOKENS";
       },
       "field 'openai.outputs.finish_reason': route 'completions': output 'TOKENS' is INT32, "
       "expected BYTES"},
      {"wrong rank", [](json& o) { o["outputs"]["text"] = "VECTORS"; },
       "output 'VECTORS' is FP32, expected BYTES"},
      {"a tensor name that is no string", [](json& o) { o["inputs"]["stop"] = 3; },
       "field 'openai.inputs.stop': expected a tensor name, got an integer"},
  };
  for (const Case& c : cases) {
    json j = Generator();
    c.change(j["openai"]);
    StatusOr<Manifest> m = ParseManifest(j.dump(), "writer.mpk");
    ASSERT_FALSE(m.ok()) << c.what;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(m.status().message().find(c.error), std::string::npos)
        << c.what << ": " << m.status().message();
    EXPECT_EQ(m.status().message().rfind("writer.mpk: manifest field 'openai.", 0), 0)
        << c.what << ": " << m.status().message();
  }
  // An input no request field fills cannot be filled on a call.
  json j = Generator();
  j["openai"]["inputs"].erase("stop");
  StatusOr<Manifest> m = ParseManifest(j.dump(), "writer.mpk");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("field 'openai.inputs': route 'completions': the model's "
                                      "input 'STOP' is mapped to no request field"),
            std::string::npos)
      << m.status().message();
  // The rank: an embedding is one row per input.
  j = Generator();
  j["outputs"].push_back({{"name", "FLAT"}, {"datatype", "FP32"}, {"shape", {4}}});
  j["inputs"].push_back({{"name", "STRINGS"}, {"datatype", "BYTES"}, {"shape", {-1}}});
  j["openai"]["routes"].push_back("embeddings");
  j["openai"]["inputs"]["input"] = "STRINGS";
  j["openai"]["outputs"]["embedding"] = "FLAT";
  m = ParseManifest(j.dump(), "writer.mpk");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("route 'embeddings': output 'FLAT' has 1 dimensions, "
                                      "expected 2 (without the batch dimension)"),
            std::string::npos)
      << m.status().message();
  j["openai"]["outputs"]["embedding"] = "VECTORS";
  EXPECT_TRUE(ParseManifest(j.dump(), "writer.mpk").ok());
}

}  // namespace
}  // namespace manypy
