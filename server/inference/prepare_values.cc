#include "server/inference/prepare_values.h"

#include <ATen/ATen.h>

#include "server/inference/datatypes.h"
#include "server/inference/shape_check.h"

namespace manypy {
namespace {

// A BYTES value's shape from its nesting (every element bytes or str).
Status BytesShape(const std::string& what, const Value& v, std::vector<int64_t>* shape) {
  const Value* at = &v;
  while (at->kind() == Value::Kind::kList || at->kind() == Value::Kind::kTuple) {
    shape->push_back(static_cast<int64_t>(at->items().size()));
    if (at->items().empty()) return Status::Ok();
    at = &at->items()[0];
  }
  if (at->kind() != Value::Kind::kBytes && at->kind() != Value::Kind::kStr) {
    return InvalidArgument(what + " is BYTES: a (nested) list of bytes or str, not " +
                           KindName(at->kind()));
  }
  return Status::Ok();
}

}  // namespace

Status PrepareValueRequest(const Value& inputs, const Manifest& m,
                           std::chrono::microseconds default_timeout,
                           Clock::time_point client_deadline, InferenceRequest* out) {
  if (inputs.kind() != Value::Kind::kDict) {
    return InvalidArgument("the inputs of a request to model '" + m.name +
                           "' are a dict of input name -> tensor, not " + KindName(inputs.kind()));
  }
  std::string names;
  for (const auto& spec : m.inputs) names += (names.empty() ? "" : ", ") + spec.name;
  for (const auto& [key, value] : inputs.dict_items()) {
    bool known = false;
    if (key.kind() == Value::Kind::kStr) {
      for (const auto& spec : m.inputs) known |= spec.name == key.to_str();
    }
    if (!known) {
      return InvalidArgument("model '" + m.name + "' has no input " + key.DebugString() +
                             " (its inputs: " + names + ")");
    }
  }
  out->inputs.clear();
  out->item_shapes.clear();
  out->batch_rows = 1;
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const TensorSpec& spec = m.inputs[k];
    const Value* value = inputs.Find(spec.name);
    std::string what = "input '" + spec.name + "' of model '" + m.name + "'";
    if (value == nullptr) {
      return InvalidArgument(what + " is missing (its inputs: " + names + ")");
    }
    std::vector<int64_t> shape;
    if (spec.datatype == "BYTES") {
      MANYPY_RETURN_IF_ERROR(BytesShape(what, *value, &shape));
    } else {
      if (value->kind() != Value::Kind::kTensor) {
        return InvalidArgument(what + " is " + spec.datatype + ": a tensor, not " +
                               KindName(value->kind()));
      }
      const at::Tensor& t = value->to_tensor();
      c10::ScalarType expected;
      TorchTypeFor(spec.datatype, &expected);
      if (t.scalar_type() != expected) {
        return InvalidArgument(what + " is " + spec.datatype + " (torch." +
                               c10::toString(expected) + "), got a tensor of torch." +
                               c10::toString(t.scalar_type()));
      }
      if (!t.device().is_cpu()) {
        return InvalidArgument(what + " is on " + t.device().str() +
                               ": tensors cross between models on the CPU");
      }
      shape.assign(t.sizes().begin(), t.sizes().end());
    }
    int64_t numel = 0;
    MANYPY_RETURN_IF_ERROR(CheckShape(what, shape, spec, m, &numel));
    if (m.max_batch_size > 0) {
      if (k == 0) out->batch_rows = shape[0];
      if (shape[0] != out->batch_rows) {
        return InvalidArgument(what + " has batch size " + std::to_string(shape[0]) + ", input '" +
                               m.inputs[0].name + "' has " + std::to_string(out->batch_rows) +
                               "; they must agree");
      }
      shape.erase(shape.begin());
    }
    out->item_shapes.push_back(std::move(shape));
    out->inputs.push_back(*value);  // a tensor's storage is shared, not copied
  }
  out->deadline = out->client_deadline = client_deadline;
  if (default_timeout.count() > 0 && out->times.received + default_timeout < out->deadline) {
    out->deadline = out->times.received + default_timeout;
  }
  return Status::Ok();
}

}  // namespace manypy
