#include "server/core/protocol_metadata.h"

#include <algorithm>

#include "common/datatype.h"
#include "server/core/manifest_metadata.h"

namespace manypy {
namespace {

inference::DataType ConfigDataType(const std::string& datatype) {
  const DatatypeInfo* info = FindDatatype(datatype);
  if (info == nullptr) return inference::TYPE_INVALID;
  return static_cast<inference::DataType>(info->config_enum);
}

void SetDuration(uint64_t count, uint64_t ns, inference::StatisticDuration* d) {
  d->set_count(count);
  d->set_ns(ns);
}

}  // namespace

void FillServerMetadata(inference::ServerMetadataResponse* response) {
  response->set_name(kServerName);
  response->set_version(MANYPY_VERSION);  // from VERSION, through CMake
  for (const char* e : {"model_repository", "model_repository(unload_dependents)", "statistics",
                        "generate", "system_shared_memory"}) {
    response->add_extensions(e);
  }
}

void FillModelMetadata(const Manifest& m, const ModelManager& models,
                       inference::ModelMetadataResponse* response) {
  FillManifestMetadata(m, response);
  for (const auto& status : models.Index()) {
    if (status.name == m.name && status.version != m.version && status.version > 0) {
      response->add_versions(std::to_string(status.version));
    }
  }
}

void FillModelConfig(const Manifest& m, const ModelSettings& settings,
                     inference::ModelConfigResponse* response) {
  inference::ModelConfig* c = response->mutable_config();
  c->set_name(m.name);
  c->set_platform(m.platform);
  c->set_backend("manypy");
  c->set_max_batch_size(static_cast<int32_t>(m.max_batch_size));
  // As Triton reports a decoupled model: set for a streaming one.
  if (m.streaming) c->mutable_model_transaction_policy()->set_decoupled(true);
  // As the model's settings ask (whether the server has a cache is its own flag).
  if (settings.response_cache) c->mutable_response_cache()->set_enable(true);
  if (settings.sequences.enabled) {
    auto* seq = c->mutable_sequence_batching();
    seq->set_max_sequence_idle_microseconds(
        static_cast<uint64_t>(settings.sequences.max_sequence_idle_microseconds));
    seq->mutable_direct();
  }
  for (const auto& in : m.inputs) {
    auto* i = c->add_input();
    i->set_name(in.name);
    i->set_data_type(ConfigDataType(in.datatype));
    for (int64_t d : in.shape) i->add_dims(d);
  }
  for (const auto& out : m.outputs) {
    auto* o = c->add_output();
    o->set_name(out.name);
    o->set_data_type(ConfigDataType(out.datatype));
    for (int64_t d : out.shape) o->add_dims(d);
  }
  auto* group = c->add_instance_group();
  group->set_name(m.name);
  group->set_kind(inference::ModelInstanceGroup::KIND_CPU);
  group->set_count(static_cast<int32_t>(settings.instance_count));
  if (settings.batching.dynamic) {
    auto* db = c->mutable_dynamic_batching();
    for (int64_t b : settings.batching.preferred_batch_sizes) {
      db->add_preferred_batch_size(static_cast<int32_t>(b));
    }
    db->set_max_queue_delay_microseconds(
        static_cast<uint64_t>(settings.batching.max_queue_delay_microseconds));
  }
}

void FillModelStatistics(const Model& model, inference::ModelStatistics* out) {
  const InferenceStats& s = model.stats();
  out->set_name(model.name());
  out->set_version(std::to_string(model.version()));
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  auto* is = out->mutable_inference_stats();
  SetDuration(s.success_count, s.success_ns, is->mutable_success());
  SetDuration(s.fail_count, s.fail_ns, is->mutable_fail());
  SetDuration(s.cancel_count, s.cancel_ns, is->mutable_cancel());
  SetDuration(s.queue_count, s.queue_ns, is->mutable_queue());
  SetDuration(s.queue_count, s.compute_input_ns, is->mutable_compute_input());
  SetDuration(s.queue_count, s.compute_infer_ns, is->mutable_compute_infer());
  SetDuration(s.queue_count, s.compute_output_ns, is->mutable_compute_output());
  SetDuration(s.cache_hit_count, s.cache_hit_ns, is->mutable_cache_hit());
  SetDuration(s.cache_miss_count, s.cache_miss_ns, is->mutable_cache_miss());
  // As Triton's: what the version's load was measured to hold, in host memory.
  auto* memory = out->add_memory_usage();
  memory->set_type("CPU");
  memory->set_id(0);
  memory->set_byte_size(static_cast<uint64_t>(std::max<int64_t>(0, model.memory().total())));
}

std::string DescribeMemory(const MemoryFootprint& memory) {
  return FormatBytes(memory.total()) + " (weights " + FormatBytes(memory.shared_bytes) +
         " once, Python " + FormatBytes(memory.slot_total()) + " over " +
         std::to_string(memory.per_slot_bytes.size()) + " interpreter(s))";
}

void FillRepositoryIndex(const ModelManager& models, bool ready_only,
                         inference::RepositoryIndexResponse* response) {
  for (const auto& status : models.Index()) {
    if (ready_only && status.state != ModelState::kReady) continue;
    auto* m = response->add_models();
    m->set_name(status.name);
    if (status.version > 0) m->set_version(std::to_string(status.version));
    m->set_state(ModelStateName(status.state));
    // A READY row has no failure to explain: its reason says what it holds.
    m->set_reason(status.state == ModelState::kReady && status.reason.empty()
                      ? "memory " + DescribeMemory(status.memory)
                      : status.reason);
  }
}

}  // namespace manypy
