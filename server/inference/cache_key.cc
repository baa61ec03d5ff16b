#include "server/inference/cache_key.h"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace manypy {
namespace {

// Feeds a SHA-256. Every field goes in with its length or a fixed width, so
// that two different requests never feed the same bytes.
class Digest {
 public:
  Digest() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1)
      throw std::runtime_error("response cache: cannot start a SHA-256");
  }
  void Bytes(const void* data, size_t n) {
    Int(static_cast<int64_t>(n));
    Raw(data, n);
  }
  void Text(const std::string& s) { Bytes(s.data(), s.size()); }
  void Int(int64_t v) { Raw(&v, sizeof(v)); }
  void Double(double v) { Raw(&v, sizeof(v)); }
  void Raw(const void* data, size_t n) {
    if (n > 0) EVP_DigestUpdate(ctx_.get(), data, n);
  }
  std::array<uint8_t, 32> Finish() {
    std::array<uint8_t, 32> out{};
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), out.data(), &n);
    return out;
  }

 private:
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx_;
};

void AddValue(Digest& d, const Value& v) {
  d.Int(static_cast<int64_t>(v.kind()));
  switch (v.kind()) {
    case Value::Kind::kTensor: {
      const at::Tensor& t = v.to_tensor();
      d.Int(static_cast<int64_t>(t.scalar_type()));
      d.Int(t.dim());
      for (int64_t size : t.sizes()) d.Int(size);
      // Decoded inputs are contiguous; another is hashed through a contiguous copy.
      at::Tensor dense = t.is_contiguous() ? t : t.contiguous();
      d.Bytes(dense.data_ptr(), dense.nbytes());
      break;
    }
    case Value::Kind::kBytes:
      d.Text(v.to_bytes());
      break;
    case Value::Kind::kStr:
      d.Text(v.to_str());
      break;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      d.Int(static_cast<int64_t>(v.items().size()));
      for (const Value& item : v.items()) AddValue(d, item);
      break;
    case Value::Kind::kDict:
      d.Int(static_cast<int64_t>(v.dict_items().size()));
      for (const auto& [key, item] : v.dict_items()) {
        AddValue(d, key);
        AddValue(d, item);
      }
      break;
    case Value::Kind::kBool:
      d.Int(v.to_bool());
      break;
    case Value::Kind::kInt:
      d.Int(v.to_int());
      break;
    case Value::Kind::kFloat:
      d.Double(v.to_double());
      break;
    case Value::Kind::kNone:
      break;
  }
}

// A parameter map in name order (a protobuf map's order is unspecified).
void AddParameters(Digest& d,
                   const google::protobuf::Map<std::string, inference::InferParameter>& parameters) {
  using Entry = google::protobuf::Map<std::string, inference::InferParameter>::value_type;
  std::vector<const Entry*> sorted;
  for (const auto& p : parameters) sorted.push_back(&p);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  d.Int(static_cast<int64_t>(sorted.size()));
  for (const auto* p : sorted) {
    d.Text(p->first);
    const inference::InferParameter& value = p->second;
    d.Int(value.parameter_choice_case());
    switch (value.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam: d.Int(value.bool_param()); break;
      case inference::InferParameter::kInt64Param: d.Int(value.int64_param()); break;
      case inference::InferParameter::kStringParam: d.Text(value.string_param()); break;
      case inference::InferParameter::kDoubleParam: d.Double(value.double_param()); break;
      case inference::InferParameter::kUint64Param: d.Int(static_cast<int64_t>(value.uint64_param())); break;
      default: break;
    }
  }
}

}  // namespace

CacheKey ResponseCacheKey(uint64_t owner, const Manifest& manifest, const InferenceRequest& request,
                          const inference::ModelInferRequest& wire) {
  Digest d;
  d.Text(manifest.name);
  d.Int(manifest.version);
  d.Int(static_cast<int64_t>(request.inputs.size()));
  for (size_t i = 0; i < request.inputs.size(); ++i) {
    // Inputs are in manifest order: the name and datatype come with the position.
    d.Text(i < manifest.inputs.size() ? manifest.inputs[i].name : std::string());
    d.Text(i < manifest.inputs.size() ? manifest.inputs[i].datatype : std::string());
    AddValue(d, request.inputs[i]);
  }
  d.Int(wire.outputs_size());
  for (const auto& output : wire.outputs()) {
    d.Text(output.name());
    AddParameters(d, output.parameters());
  }
  AddParameters(d, wire.parameters());
  return CacheKey{owner, d.Finish()};
}

}  // namespace manypy
