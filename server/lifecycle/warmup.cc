#include "server/lifecycle/warmup.h"

#include <ATen/ATen.h>

#include "server/inference/datatypes.h"

namespace manypy {
namespace {

Value NestedBytes(const std::vector<int64_t>& shape, size_t dim) {
  if (dim == shape.size()) return Value::Bytes("manypy");
  Value::Items items;
  for (int64_t i = 0; i < shape[dim]; ++i) items.push_back(NestedBytes(shape, dim + 1));
  return Value::List(std::move(items));
}

}  // namespace

std::vector<Value> SignatureInputs(const Manifest& m, int64_t batch) {
  std::vector<Value> inputs;
  for (const TensorSpec& spec : m.inputs) {
    std::vector<int64_t> shape;
    if (m.max_batch_size > 0) shape.push_back(batch);
    for (int64_t d : spec.shape) shape.push_back(d < 0 ? 1 : d);
    c10::ScalarType type;
    if (TorchTypeFor(spec.datatype, &type)) {
      inputs.emplace_back(at::zeros(shape, at::TensorOptions().dtype(type)));
    } else {
      inputs.push_back(NestedBytes(shape, 0));
    }
  }
  return inputs;
}

Status WarmUp(Executable& model, const Manifest& m, size_t slot, int64_t runs) {
  if (runs <= 0) return Status::Ok();
  std::vector<Value> inputs = SignatureInputs(m);
  InterruptHook hook;  // nothing interrupts a warm-up
  // A compiled model compiles here, not on a request: batch 1 (Dynamo
  // specialises it), then 2, whose batch dimension the runtime marks dynamic.
  int64_t batched_runs = model.compiled() && m.max_batch_size >= 2 && !m.streaming ? 1 : 0;
  for (int64_t i = 0; i < runs + batched_runs; ++i) {
    if (i == runs) inputs = SignatureInputs(m, 2);
    Status status;
    if (m.streaming) {
      // Its first response is the warm-up; the rest of the stream is not needed.
      const Status enough = Cancelled("warm-up has its first response");
      std::string ignored;
      status = model.RunStream(slot, inputs, &hook, [&](std::vector<Value>&) { return enough; },
                               &ignored);
      if (status.code() == StatusCode::kCancelled) status = Status::Ok();
    } else {
      std::string error_type;
      auto out = model.RunReportingError(slot, inputs, &hook, &error_type);
      status = out.ok() ? Status::Ok() : out.status();
      // A model that calls other models (manypy.infer) cannot make its nested
      // calls outside a request: it ran up to the first one, which is warm enough.
      if (error_type == "manypy.InferenceError") return Status::Ok();
    }
    if (!status.ok()) {
      return Internal("warm-up of model '" + m.name + "' with inputs made from its signature failed: " +
                      status.message());
    }
  }
  return Status::Ok();
}

}  // namespace manypy
