// Fuzzes the HTTP inference codec: the input is the Inference-Header-Content-Length value
// on its first line (empty: no header; not a number: the input is skipped), then the body
// (JSON, optionally followed by binary data). A decoded request goes on through Prepare
// (for a manifest made to fit it), as proto JSON, and back out through the response
// encoder with its inputs echoed as outputs. Decoding and Prepare may refuse only with
// INVALID_ARGUMENT; encoding raw bytes that are not whole elements may say INTERNAL. A
// JSON part nested past the limit is refused naming it, and none within it is. Mutations
// include deep repeats (deep_inputs.h).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz/deep_inputs.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_manifest.h"
#include "server/http/infer_codec.h"
#include "server/http/proto_json.h"
#include "server/inference/prepare.h"

namespace {

using namespace manypy;

// The first line as the header's value, as the HTTP session parses it.
bool SplitHeader(std::string_view input, std::optional<size_t>* json_length,
                 std::string_view* body) {
  size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return false;
  std::string_view value = input.substr(0, newline);
  *body = input.substr(newline + 1);
  if (value.empty()) return true;
  if (value.size() > 9) return false;
  size_t n = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  *json_length = n;
  return true;
}

void EchoResponse(const HttpInferRequest& request) {
  inference::ModelInferResponse response;
  response.set_model_name(request.wire.model_name());
  response.set_id(request.wire.id());
  for (int i = 0; i < request.wire.inputs_size(); ++i) {
    const auto& in = request.wire.inputs(i);
    auto* out = response.add_outputs();
    out->set_name(in.name());
    out->set_datatype(in.datatype());
    *out->mutable_shape() = in.shape();
    *response.add_raw_output_contents() = request.wire.raw_input_contents(i);
  }
  StatusOr<HttpInferBody> encoded = EncodeInferResponse(response, request);
  if (!encoded.ok()) {
    FUZZ_CHECK(encoded.status().code() == StatusCode::kInternal, "%s",
               encoded.status().ToString().c_str());
    return;
  }
  if (encoded->json_length.has_value()) {
    FUZZ_CHECK(*encoded->json_length <= encoded->body.size(), "json_length past the body");
  }
}

}  // namespace

// No region is registered: a request naming one is refused as a client error.
const manypy::SharedMemoryRegions kNoRegions;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::optional<size_t> json_length;
  std::string_view body;
  if (!SplitHeader(std::string_view(reinterpret_cast<const char*>(data), size), &json_length,
                   &body))
    return 0;
  HttpInferRequest request;
  Status s = DecodeInferRequest(body, json_length, "fuzz", "1", &request);
  const size_t json_size = json_length.value_or(body.size());
  if (json_size <= body.size()) {  // else refused before the JSON is read
    fuzz::CheckDepthVerdict(s, fuzz::RapidJsonDepth(body.substr(0, json_size), true),
                            "the inference request");
  }
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "%s", s.ToString().c_str());
    return 0;
  }
  FUZZ_CHECK(request.wire.raw_input_contents_size() == request.wire.inputs_size(),
             "%d raw contents for %d inputs", request.wire.raw_input_contents_size(),
             request.wire.inputs_size());
  FUZZ_CHECK(request.binary_outputs.size() == static_cast<size_t>(request.wire.outputs_size()),
             "binary_outputs not one per output");
  rapidjson::Document doc;
  JsonText(ProtoToJson(request.wire, doc.GetAllocator()));

  Manifest manifest = fuzz::ManifestForRequest(request.wire);
  InferenceRequest prepared;
  Status p = PrepareRequest(request.wire, manifest, std::chrono::microseconds(0),
                            Clock::time_point::max(), &kNoRegions, &prepared);
  if (p.ok()) {
    fuzz::CheckPrepared(request.wire, manifest, prepared);
  } else {
    FUZZ_CHECK(p.code() == StatusCode::kInvalidArgument, "%s", p.ToString().c_str());
  }
  EchoResponse(request);
  return 0;
}
