#include "server/inference/batch_assembly.h"

#include <ATen/ATen.h>

namespace manypy {
namespace {

bool IsList(const Value& v) { return v.kind() == Value::Kind::kList || v.kind() == Value::Kind::kTuple; }

}  // namespace

std::vector<Value> JoinInputs(const std::vector<RequestPtr>& batch) {
  if (batch.size() == 1) return batch[0]->inputs;
  std::vector<Value> joined;
  size_t inputs = batch[0]->inputs.size();
  for (size_t k = 0; k < inputs; ++k) {
    if (batch[0]->inputs[k].kind() == Value::Kind::kTensor) {
      std::vector<at::Tensor> parts;
      parts.reserve(batch.size());
      for (const auto& r : batch) parts.push_back(r->inputs[k].to_tensor());
      joined.emplace_back(at::cat(parts, 0));
    } else {  // BYTES: the outer list is the batch dimension
      Value::Items items;
      for (const auto& r : batch) {
        const auto& rows = r->inputs[k].items();
        items.insert(items.end(), rows.begin(), rows.end());
      }
      joined.push_back(Value::List(std::move(items)));
    }
  }
  return joined;
}

Status SplitOutputs(const Manifest& m, const std::vector<RequestPtr>& batch,
                    std::vector<Value> outputs, std::vector<std::vector<Value>>* per_request) {
  per_request->assign(batch.size(), {});
  if (batch.size() == 1) {
    (*per_request)[0] = std::move(outputs);
    return Status::Ok();
  }
  int64_t total = 0;
  for (const auto& r : batch) total += r->batch_rows;
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Value& out = outputs[k];
    std::string name = k < m.outputs.size() ? m.outputs[k].name : std::to_string(k);
    int64_t rows = -1;
    if (out.kind() == Value::Kind::kTensor && out.to_tensor().dim() > 0) rows = out.to_tensor().size(0);
    if (IsList(out)) rows = static_cast<int64_t>(out.items().size());
    if (rows != total) {
      return Internal("model '" + m.name + "' returned output '" + name + "' with " +
                      (rows < 0 ? std::string("no batch dimension") : std::to_string(rows) + " rows") +
                      " for a batch of " + std::to_string(total) + " rows");
    }
    int64_t offset = 0;
    for (size_t i = 0; i < batch.size(); ++i) {
      int64_t n = batch[i]->batch_rows;
      if (out.kind() == Value::Kind::kTensor) {
        (*per_request)[i].emplace_back(out.to_tensor().narrow(0, offset, n));
      } else {
        const auto& items = out.items();
        (*per_request)[i].push_back(
            Value::List(Value::Items(items.begin() + offset, items.begin() + offset + n)));
      }
      offset += n;
    }
  }
  return Status::Ok();
}

}  // namespace manypy
