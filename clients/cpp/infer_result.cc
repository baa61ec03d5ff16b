#include "clients/cpp/infer_result.h"

#include "clients/cpp/contents_codec.h"
#include "proto/grpc_service.pb.h"

namespace manypy::client {

StatusOr<InferResult> InferResult::FromResponse(inference::ModelInferResponse&& r) {
  InferResult result;
  result.model_name_ = r.model_name();
  result.model_version_ = r.model_version();
  result.id_ = r.id();
  const bool raw = r.raw_output_contents_size() > 0;
  if (raw && r.raw_output_contents_size() != r.outputs_size()) {
    return Internal("response has " + std::to_string(r.outputs_size()) + " outputs but " +
                    std::to_string(r.raw_output_contents_size()) + " raw output buffers");
  }
  for (int i = 0; i < r.outputs_size(); ++i) {
    auto* o = r.mutable_outputs(i);
    InferOutput out{o->name(), o->datatype(), {o->shape().begin(), o->shape().end()}, {}};
    if (raw) {
      out.raw = std::move(*r.mutable_raw_output_contents(i));
    } else {
      StatusOr<std::string> bytes = ContentsToRaw(o->datatype(), o->contents());
      if (!bytes.ok()) return bytes.status();
      out.raw = std::move(bytes).value();
    }
    result.names_.push_back(out.name);
    result.outputs_[out.name] = std::move(out);
  }
  return result;
}

StatusOr<InferOutput> InferResult::Output(const std::string& name) const {
  auto it = outputs_.find(name);
  if (it == outputs_.end()) return NotFound("no output named '" + name + "'");
  return it->second;
}

StatusOr<std::vector<std::string>> InferResult::AsStrings(const std::string& name) const {
  auto it = outputs_.find(name);
  if (it == outputs_.end()) return NotFound("no output named '" + name + "'");
  if (it->second.datatype != "BYTES") {
    return InvalidArgument("output '" + name + "' is " + it->second.datatype + ", not BYTES");
  }
  std::vector<std::string> values;
  if (!DecodeBytesElements(it->second.raw, &values)) {
    return Internal("output '" + name + "' is not well-formed BYTES data");
  }
  return values;
}

}  // namespace manypy::client
