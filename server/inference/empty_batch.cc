#include "server/inference/empty_batch.h"

#include <ATen/ATen.h>

#include "server/inference/datatypes.h"

namespace manypy {

bool EmptyBatchOutputs(const Manifest& m, std::vector<Value>* outputs) {
  if (m.max_batch_size <= 0) return false;
  for (const TensorSpec& spec : m.outputs) {
    for (int64_t d : spec.shape) {
      if (d < 0) return false;
    }
  }
  outputs->clear();
  for (const TensorSpec& spec : m.outputs) {
    c10::ScalarType type;
    if (!TorchTypeFor(spec.datatype, &type)) {  // BYTES: the outer list is the batch
      outputs->push_back(Value::List(Value::Items{}));
      continue;
    }
    std::vector<int64_t> shape{0};
    shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
    outputs->emplace_back(at::empty(shape, at::TensorOptions().dtype(type)));
  }
  return true;
}

}  // namespace manypy
