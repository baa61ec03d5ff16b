#include "server/inference/prepare.h"

#include "server/inference/input_decoder.h"
#include "server/inference/shared_memory_refs.h"

namespace manypy {

Status PrepareRequest(const inference::ModelInferRequest& wire, const Manifest& m,
                      std::chrono::microseconds timeout, Clock::time_point client_deadline,
                      const SharedMemoryRegions* regions, InferenceRequest* out) {
  out->id = wire.id();
  Value::DictItems parameters;
  for (const auto& [key, p] : wire.parameters()) {
    using P = inference::InferParameter;
    switch (p.parameter_choice_case()) {
      case P::kBoolParam: parameters.emplace_back(Value(key), Value(p.bool_param())); break;
      case P::kInt64Param: parameters.emplace_back(Value(key), Value(p.int64_param())); break;
      case P::kStringParam: parameters.emplace_back(Value(key), Value(p.string_param())); break;
      case P::kDoubleParam: parameters.emplace_back(Value(key), Value(p.double_param())); break;
      case P::kUint64Param:
        parameters.emplace_back(Value(key), Value(static_cast<int64_t>(p.uint64_param())));
        break;
      default: break;
    }
  }
  out->parameters = Value::Dict(std::move(parameters));
  for (const auto& requested : wire.outputs()) {
    bool known = false;
    for (const auto& spec : m.outputs) known |= spec.name == requested.name();
    if (!known) {
      return InvalidArgument("model '" + m.name + "' has no output named '" + requested.name() + "'");
    }
    auto ref = ResolveSharedMemory(requested.parameters(), regions,
                                   "output '" + requested.name() + "'");
    if (!ref.ok()) return ref.status();
    if (ref->has_value()) out->output_regions[requested.name()] = std::move(**ref);
  }
  MANYPY_RETURN_IF_ERROR(DecodeInputs(wire, m, regions, &out->inputs, &out->shm_views));
  // Every input's batch dimension was checked against the manifest; they must agree.
  out->batch_rows = 1;
  out->item_shapes.clear();
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    int i = 0;
    while (wire.inputs(i).name() != m.inputs[k].name) ++i;
    const auto& shape = wire.inputs(i).shape();
    std::vector<int64_t> item(shape.begin(), shape.end());
    if (m.max_batch_size > 0) {
      if (k == 0) out->batch_rows = item[0];
      if (item[0] != out->batch_rows) {
        return InvalidArgument("input '" + m.inputs[k].name + "' has batch size " +
                               std::to_string(item[0]) + ", input '" + m.inputs[0].name +
                               "' has " + std::to_string(out->batch_rows) + "; they must agree");
      }
      item.erase(item.begin());
    }
    out->item_shapes.push_back(std::move(item));
  }
  out->deadline = out->client_deadline = client_deadline;
  if (timeout.count() > 0 && out->times.received + timeout < out->deadline) {
    out->deadline = out->times.received + timeout;
  }
  return Status::Ok();
}

}  // namespace manypy
