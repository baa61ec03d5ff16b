// Fuzzes the generate extension's request codec (server/http/generate_codec.h,
// /v2/models/M/generate and generate_stream): the first byte picks the model (bit 1: an
// LLM-like model, else one input of every datatype; bit 0: batching), the rest is the
// body. Properties:
//   - the codec refuses only with INVALID_ARGUMENT; a body nested past the JSON limit is
//     refused naming it, and no body within it is refused as too deep;
//   - what it accepts is one tensor per field, each an input of the model with its
//     datatype, a shape of at least the input's rank and contents of exactly that many
//     elements;
//   - Prepare then takes it or refuses it with INVALID_ARGUMENT, and what it takes is the
//     request's tensors.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "common/datatype.h"
#include "fuzz/deep_inputs.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_manifest.h"
#include "package_format/manifest.h"
#include "server/core/manifest_metadata.h"
#include "server/http/generate_codec.h"
#include "server/inference/prepare.h"

namespace {

using namespace manypy;

Manifest GenerateModel(bool llm, bool batched) {
  Manifest m;
  m.name = llm ? "llm" : "every_type";
  m.version = 1;
  m.max_batch_size = batched ? 8 : 0;
  if (llm) {
    m.inputs = {{"text_input", "BYTES", {1}},  {"max_tokens", "INT32", {1}},
                {"bad_words", "BYTES", {-1}},  {"stream", "BOOL", {1}},
                {"temperature", "FP32", {1}}};
  } else {
    m.inputs = {{"mask", "BOOL", {-1}},        {"image", "UINT8", {-1, -1, 3}},
                {"ushort", "UINT16", {2, -1}}, {"uint", "UINT32", {-1}},
                {"seed", "UINT64", {1}},       {"small", "INT8", {-1}},
                {"short", "INT16", {-1, 2}},   {"max_tokens", "INT32", {1}},
                {"ids", "INT64", {-1, -1}},    {"half", "FP16", {2}},
                {"bhalf", "BF16", {-1}},       {"temperature", "FP32", {1}},
                {"top_p", "FP64", {-1}},       {"text_input", "BYTES", {-1}}};
  }
  m.outputs = {{"text_output", "BYTES", {-1}}};
  return m;
}

struct Variant {
  Manifest manifest;
  inference::ModelMetadataResponse metadata;
};

const Variant& VariantFor(bool llm, bool batched) {
  static const Variant* variants = [] {
    auto* v = new Variant[4];
    for (int i = 0; i < 4; ++i) {
      v[i].manifest = GenerateModel(i & 2, i & 1);
      FillManifestMetadata(v[i].manifest, &v[i].metadata);
    }
    return v;
  }();
  return variants[(llm ? 2 : 0) + (batched ? 1 : 0)];
}

// The number of elements `raw` holds for `dt`, or -1 when it is not whole elements.
int64_t ElementCount(const DatatypeInfo& dt, const std::string& raw) {
  if (dt.wire_size > 0) return raw.size() % dt.wire_size == 0 ? raw.size() / dt.wire_size : -1;
  int64_t count = 0;
  for (size_t at = 0; at < raw.size(); ++count) {
    if (raw.size() - at < 4) return -1;
    uint32_t length = 0;
    std::memcpy(&length, raw.data() + at, 4);
    at += 4;
    if (raw.size() - at < length) return -1;
    at += length;
  }
  return count;
}

void CheckDecoded(const inference::ModelInferRequest& wire, const Variant& model) {
  FUZZ_CHECK(wire.raw_input_contents_size() == wire.inputs_size(), "%d contents for %d inputs",
             wire.raw_input_contents_size(), wire.inputs_size());
  FUZZ_CHECK(wire.model_name() == model.manifest.name, "model name %s",
             wire.model_name().c_str());
  for (int i = 0; i < wire.inputs_size(); ++i) {
    const auto& in = wire.inputs(i);
    const inference::ModelMetadataResponse::TensorMetadata* spec = nullptr;
    for (const auto& m : model.metadata.inputs()) {
      if (m.name() == in.name()) spec = &m;
    }
    FUZZ_CHECK(spec != nullptr, "decoded a field '%s' that is no input", in.name().c_str());
    FUZZ_CHECK(in.datatype() == spec->datatype(), "input %s typed %s, declared %s",
               in.name().c_str(), in.datatype().c_str(), spec->datatype().c_str());
    FUZZ_CHECK(in.shape_size() >= spec->shape_size(), "input %s of rank %d below the input's %d",
               in.name().c_str(), in.shape_size(), spec->shape_size());
    int64_t numel = 1;
    for (int64_t d : in.shape()) {
      FUZZ_CHECK(d >= 0, "input %s has a negative dimension", in.name().c_str());
      if (d == 0) numel = 0;
      else if (numel != 0) numel *= d;  // the elements exist: no overflow
    }
    const DatatypeInfo* dt = FindDatatype(in.datatype());
    FUZZ_CHECK(dt != nullptr, "unknown datatype");
    const int64_t count = ElementCount(*dt, wire.raw_input_contents(i));
    FUZZ_CHECK(count == numel, "input %s: %lld elements for a shape of %lld", in.name().c_str(),
               static_cast<long long>(count), static_cast<long long>(numel));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const Variant& model = VariantFor((data[0] & 2) != 0, (data[0] & 1) != 0);
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);

  inference::ModelInferRequest wire;
  int64_t timeout_us = 0;
  Status s = DecodeGenerateRequest(body, model.metadata, "1", &wire, &timeout_us);
  fuzz::CheckDepthVerdict(s, fuzz::RapidJsonDepth(body, false), "the generate request");
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "%s", s.ToString().c_str());
    FUZZ_CHECK(!s.message().empty(), "refused without a message");
    return 0;
  }
  CheckDecoded(wire, model);

  static const SharedMemoryRegions kNoRegions;
  InferenceRequest prepared;
  Status p = PrepareRequest(wire, model.manifest, std::chrono::microseconds(0),
                            Clock::time_point::max(), &kNoRegions, &prepared);
  if (p.ok()) {
    fuzz::CheckPrepared(wire, model.manifest, prepared);
  } else {
    FUZZ_CHECK(p.code() == StatusCode::kInvalidArgument, "%s", p.ToString().c_str());
  }
  return 0;
}
