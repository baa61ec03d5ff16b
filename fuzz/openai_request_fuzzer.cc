// Fuzzes the OpenAI routes' request codec (server/http/openai_request_codec.h): the first
// byte picks the route and the model's variant, the rest is the request body. The model
// declares every input field of the convention (docs/text-generation.md), so any body gets
// as deep as the codec goes. Properties:
//   - the codec refuses only with INVALID_ARGUMENT, naming a field the route knows; a body
//     nested past the JSON limit is refused naming it, and none within it is;
//   - a request it accepts is one Prepare takes for that model (a decoded request the
//     model then refuses would be answered with tensor names the OpenAI client never sent).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz/deep_inputs.h"
#include "fuzz/fuzz_check.h"
#include "package_format/manifest.h"
#include "package_format/openai_spec.h"
#include "server/core/manifest_metadata.h"
#include "server/http/openai_request_codec.h"
#include "server/inference/prepare.h"

namespace {

using namespace manypy;

// The model: its list inputs have a variable length, its scalars one element, as the
// convention lets a model declare them. `batched`: max_batch_size 8 (the metadata shows
// the batch dimension, which the codec fills with 1). `int32_tokens`: MAX_TOKENS INT32,
// so a count past 2^31 must be refused as out of range.
Manifest OpenAiModel(bool batched, bool int32_tokens) {
  Manifest m;
  m.name = "generator";
  m.version = 1;
  m.max_batch_size = batched ? 8 : 0;
  m.inputs = {{"PROMPT", "BYTES", {-1}},      {"MESSAGES", "BYTES", {1}},
              {"INPUT", "BYTES", {-1}},       {"MAX_TOKENS", int32_tokens ? "INT32" : "INT64", {1}},
              {"TEMPERATURE", "FP32", {1}},   {"TOP_P", "FP64", {1}},
              {"STOP", "BYTES", {-1}},        {"SEED", "INT64", {1}}};
  m.outputs = {{"TEXT", "BYTES", {1}}, {"FINISH_REASON", "BYTES", {1}},
               {"COMPLETION_TOKENS", "INT64", {1}}, {"PROMPT_TOKENS", "INT64", {1}},
               {"EMBEDDING", "FP32", {-1, -1}}};
  m.openai.routes = {kCompletionsRoute, kChatRoute, kEmbeddingsRoute};
  // Sorted by field, as the manifest parser keeps them.
  m.openai.inputs = {{"input", "INPUT"},          {"max_tokens", "MAX_TOKENS"},
                     {"messages", "MESSAGES"},    {"prompt", "PROMPT"},
                     {"seed", "SEED"},            {"stop", "STOP"},
                     {"temperature", "TEMPERATURE"}, {"top_p", "TOP_P"}};
  m.openai.outputs = {{"completion_tokens", "COMPLETION_TOKENS"}, {"embedding", "EMBEDDING"},
                      {"finish_reason", "FINISH_REASON"}, {"prompt_tokens", "PROMPT_TOKENS"},
                      {"text", "TEXT"}};
  auto problem = OpenAiProblem(m.openai, m.inputs, m.outputs);
  FUZZ_CHECK(problem.first.empty(), "the target's model does not fit the convention: %s: %s",
             problem.first.c_str(), problem.second.c_str());
  return m;
}

struct Variant {
  Manifest manifest;
  inference::ModelMetadataResponse metadata;
};

Variant MakeVariant(bool batched, bool int32_tokens) {
  Manifest manifest = OpenAiModel(batched, int32_tokens);
  inference::ModelMetadataResponse metadata;
  FillManifestMetadata(manifest, &metadata);
  return {std::move(manifest), std::move(metadata)};
}

const Variant& VariantFor(bool batched, bool int32_tokens) {
  static const Variant variants[4] = {MakeVariant(false, false), MakeVariant(false, true),
                                      MakeVariant(true, false), MakeVariant(true, true)};
  return variants[(batched ? 2 : 0) + (int32_tokens ? 1 : 0)];
}

void CheckRefusal(const Status& s, const char* stage) {
  FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "%s: %s", stage, s.ToString().c_str());
  FUZZ_CHECK(!s.message().empty(), "%s refused without a message", stage);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const char* routes[3] = {kCompletionsRoute, kChatRoute, kEmbeddingsRoute};
  const std::string route = routes[selector % 3];
  const Variant& model = VariantFor((selector & 4) != 0, (selector & 8) != 0);
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  rapidjson::Document doc;
  OpenAiCall call;
  std::string param;
  Status s = DecodeOpenAiCall(body, route, &doc, &call, &param);
  fuzz::CheckDepthVerdict(s, fuzz::RapidJsonDepth(body, false), "the request body");
  if (!s.ok()) {
    // Its `param` may be "": the body as a whole (not JSON, not an object).
    CheckRefusal(s, "DecodeOpenAiCall");
    return 0;
  }
  FUZZ_CHECK(call.route == route, "route %s became %s", route.c_str(), call.route.c_str());
  FUZZ_CHECK(!call.include_usage || call.stream, "include_usage without stream");

  inference::ModelInferRequest wire;
  s = DecodeOpenAiInputs(doc, &call, model.manifest.openai, model.metadata, &wire, &param);
  if (!s.ok()) {
    CheckRefusal(s, "DecodeOpenAiInputs");
    FUZZ_CHECK(!param.empty(), "DecodeOpenAiInputs refused without naming a field: %s",
               s.ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(wire.inputs_size() == static_cast<int>(model.manifest.inputs.size()),
             "%d inputs filled for a model of %zu", wire.inputs_size(),
             model.manifest.inputs.size());
  FUZZ_CHECK(wire.raw_input_contents_size() == wire.inputs_size(), "%d contents for %d inputs",
             wire.raw_input_contents_size(), wire.inputs_size());

  static const SharedMemoryRegions kNoRegions;
  InferenceRequest prepared;
  s = PrepareRequest(wire, model.manifest, std::chrono::microseconds(0),
                     Clock::time_point::max(), &kNoRegions, &prepared);
  FUZZ_CHECK(s.ok(), "the model refused what the codec decoded for it: %s",
             s.ToString().c_str());
  FUZZ_CHECK(prepared.inputs.size() == model.manifest.inputs.size(), "%zu values for %zu inputs",
             prepared.inputs.size(), model.manifest.inputs.size());
  return 0;
}
