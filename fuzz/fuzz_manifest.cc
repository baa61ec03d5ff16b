#include "fuzz/fuzz_manifest.h"

#include <ATen/core/Tensor.h>

#include <set>

#include "fuzz/fuzz_check.h"

namespace manypy::fuzz {
namespace {

// The number of BYTES leaves in a nested list `depth` levels deep, or -1 when the nesting
// is not `shape`.
int64_t CountLeaves(const Value& v, const std::vector<int64_t>& shape, size_t depth) {
  if (depth == shape.size()) return v.kind() == Value::Kind::kBytes ? 1 : -1;
  if (v.kind() != Value::Kind::kList ||
      static_cast<int64_t>(v.items().size()) != shape[depth])
    return -1;
  int64_t total = 0;
  for (const Value& item : v.items()) {
    int64_t n = CountLeaves(item, shape, depth + 1);
    if (n < 0) return -1;
    total += n;
  }
  return total;
}

}  // namespace

Manifest ManifestForRequest(const inference::ModelInferRequest& request) {
  Manifest m;
  m.name = "fuzz";
  m.max_batch_size = !request.model_name().empty() && request.model_name()[0] == 'b' ? 4 : 0;
  std::set<std::string> names;
  for (int i = request.inputs_size() - 1; i >= 0; --i) {
    const auto& input = request.inputs(i);
    if (!names.insert(input.name()).second) continue;
    TensorSpec spec;
    spec.name = input.name();
    spec.datatype = IsValidDatatype(input.datatype()) ? input.datatype() : "FP32";
    for (int d = m.max_batch_size > 0 ? 1 : 0; d < input.shape_size(); ++d) {
      int64_t dim = input.shape(d);
      spec.shape.push_back(dim >= 1 && dim % 2 == 0 ? dim : -1);
    }
    m.inputs.push_back(std::move(spec));
  }
  m.outputs.push_back({"OUTPUT0", "FP32", {-1}});
  return m;
}

void CheckPrepared(const inference::ModelInferRequest& request, const Manifest& m,
                   const InferenceRequest& prepared) {
  FUZZ_CHECK(prepared.inputs.size() == m.inputs.size(), "%zu values for %zu inputs",
             prepared.inputs.size(), m.inputs.size());
  FUZZ_CHECK(prepared.item_shapes.size() == m.inputs.size(), "%zu item shapes",
             prepared.item_shapes.size());
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    int i = 0;
    while (request.inputs(i).name() != m.inputs[k].name) ++i;
    std::vector<int64_t> shape(request.inputs(i).shape().begin(), request.inputs(i).shape().end());
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;  // CheckShape accepted it, so it does not overflow
    const Value& v = prepared.inputs[k];
    if (m.inputs[k].datatype == "BYTES") {
      FUZZ_CHECK(CountLeaves(v, shape, 0) == numel, "input %zu: BYTES nesting is not its shape",
                 k);
      continue;
    }
    FUZZ_CHECK(v.kind() == Value::Kind::kTensor, "input %zu is not a tensor", k);
    const at::Tensor& t = v.to_tensor();
    FUZZ_CHECK(t.sizes().vec() == shape, "input %zu: tensor shape differs from the request's", k);
    FUZZ_CHECK(t.numel() == numel, "input %zu: %lld elements, shape needs %lld", k,
               static_cast<long long>(t.numel()), static_cast<long long>(numel));
  }
}

}  // namespace manypy::fuzz
