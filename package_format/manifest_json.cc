// ManifestToJson and the manifest's equality, apart from the parser's rules.
#include <nlohmann/json.hpp>
#include <tuple>

#include "package_format/manifest.h"

namespace manypy {

std::string ManifestToJson(const Manifest& m) {
  nlohmann::ordered_json ep = {{"kind", m.entry_point.kind}};
  if (m.entry_point.kind == "factory") {
    ep["module"] = m.entry_point.module;
    ep["function"] = m.entry_point.function;
    if (!m.entry_point.weights_package.empty() || !m.entry_point.weights_resource.empty())
      ep["weights"] = {{"package", m.entry_point.weights_package},
                       {"resource", m.entry_point.weights_resource}};
  } else {
    ep["package"] = m.entry_point.package;
    ep["resource"] = m.entry_point.resource;
  }
  auto tensors = [](const std::vector<TensorSpec>& specs) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const TensorSpec& t : specs)
      list.push_back({{"name", t.name}, {"datatype", t.datatype}, {"shape", t.shape}});
    return list;
  };
  nlohmann::ordered_json j = {
      {"schema_version", m.schema_version},
      {"name", m.name},
      {"version", m.version},
      {"platform", m.platform},
      {"entry_point", ep},
      {"method", m.method},
      {"inputs", tensors(m.inputs)},
      {"outputs", tensors(m.outputs)},
      {"max_batch_size", m.max_batch_size},
      {"batching",
       {{"dynamic", m.batching.dynamic},
        {"preferred_batch_sizes", m.batching.preferred_batch_sizes},
        {"max_queue_delay_microseconds", m.batching.max_queue_delay_microseconds}}},
      {"instance_count", m.instance_count},
      {"max_queue_size", m.max_queue_size},
      {"max_execution_seconds", m.max_execution_seconds},
      {"default_timeout_microseconds", m.default_timeout_microseconds},
      {"device", m.device},
      {"description", m.description}};
  // Written only when set: a reader that predates the field loads the rest.
  if (m.streaming) j["streaming"] = true;
  if (m.response_cache) j["response_cache"] = true;
  if (m.sequence_batching.enabled)
    j["sequence_batching"] = {
        {"max_sequence_idle_microseconds", m.sequence_batching.max_sequence_idle_microseconds},
        {"max_concurrent_sequences", m.sequence_batching.max_concurrent_sequences}};
  if (!m.openai.routes.empty()) {
    nlohmann::ordered_json inputs = nlohmann::ordered_json::object();
    nlohmann::ordered_json outputs = nlohmann::ordered_json::object();
    for (const auto& [field, tensor] : m.openai.inputs) inputs[field] = tensor;
    for (const auto& [field, tensor] : m.openai.outputs) outputs[field] = tensor;
    j["openai"] = {{"routes", m.openai.routes}, {"inputs", inputs}, {"outputs", outputs}};
  }
  if (m.schema_version >= 2)
    j["packaged_with"] = {{"torch", m.packaged_with.torch},
                          {"python", m.packaged_with.python},
                          {"manypy", m.packaged_with.manypy}};
  // Replace rather than throw on invalid UTF-8 in hand-built manifests.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

bool TensorSpec::operator==(const TensorSpec& o) const {
  return std::tie(name, datatype, shape) == std::tie(o.name, o.datatype, o.shape);
}
bool BatchingSpec::operator==(const BatchingSpec& o) const {
  return std::tie(dynamic, preferred_batch_sizes, max_queue_delay_microseconds) ==
         std::tie(o.dynamic, o.preferred_batch_sizes, o.max_queue_delay_microseconds);
}
bool SequenceBatchingSpec::operator==(const SequenceBatchingSpec& o) const {
  return std::tie(enabled, max_sequence_idle_microseconds, max_concurrent_sequences) ==
         std::tie(o.enabled, o.max_sequence_idle_microseconds, o.max_concurrent_sequences);
}
bool EntryPoint::operator==(const EntryPoint& o) const {
  return std::tie(kind, package, resource, module, function, weights_package, weights_resource) ==
         std::tie(o.kind, o.package, o.resource, o.module, o.function, o.weights_package,
                  o.weights_resource);
}
bool PackagedWith::operator==(const PackagedWith& o) const {
  return std::tie(torch, python, manypy) == std::tie(o.torch, o.python, o.manypy);
}
bool Manifest::operator==(const Manifest& o) const {
  return std::tie(schema_version, name, version, platform, entry_point, method, inputs, outputs,
                  max_batch_size, batching, instance_count, max_queue_size,
                  max_execution_seconds, default_timeout_microseconds, device, description,
                  streaming, response_cache, sequence_batching, openai, packaged_with) ==
         std::tie(o.schema_version, o.name, o.version, o.platform, o.entry_point, o.method,
                  o.inputs, o.outputs, o.max_batch_size, o.batching, o.instance_count, o.max_queue_size,
                  o.max_execution_seconds, o.default_timeout_microseconds, o.device,
                  o.description, o.streaming, o.response_cache, o.sequence_batching, o.openai,
                  o.packaged_with);
}

}  // namespace manypy
