#include "server/inference/shape_check.h"

#include <limits>

namespace manypy {

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

Status CheckShape(const std::string& what, const std::vector<int64_t>& shape,
                  const TensorSpec& spec, const Manifest& m, int64_t* numel) {
  std::vector<int64_t> expected;
  if (m.max_batch_size > 0) expected.push_back(-1);
  for (int64_t d : spec.shape) expected.push_back(d);
  bool ok = shape.size() == expected.size();
  *numel = 1;
  // The product of the non-zero dimensions must fit in int64: a wrapped count could match a
  // small byte count and reach the tensor allocation (found by fuzz/infer_request).
  int64_t nonzero = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return InvalidArgument(what + " has a negative dimension in shape " + ShapeString(shape));
    }
    if (shape[i] > 0 && nonzero > std::numeric_limits<int64_t>::max() / shape[i]) {
      return InvalidArgument(what + " has shape " + ShapeString(shape) +
                             ", more elements than a tensor can hold");
    }
    if (shape[i] > 0) nonzero *= shape[i];
    if (ok && expected[i] != -1 && expected[i] != shape[i]) ok = false;
    *numel *= shape[i];
  }
  if (!ok) {
    return InvalidArgument(what + " has shape " + ShapeString(shape) + ", model '" + m.name +
                           "' expects " + ShapeString(expected) +
                           (m.max_batch_size > 0 ? " (first dimension: batch size)" : ""));
  }
  // Batch size 0 is a request, as in Triton (docs/packaging.md#empty-batches).
  if (m.max_batch_size > 0 && shape[0] > m.max_batch_size) {
    return InvalidArgument(what + " has batch size " + std::to_string(shape[0]) + ", model '" +
                           m.name + "' accepts 0.." + std::to_string(m.max_batch_size));
  }
  return Status::Ok();
}

}  // namespace manypy
