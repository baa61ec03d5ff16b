#include "server/lifecycle/model_settings.h"

#include <algorithm>
#include <cstdlib>

namespace manypy {
namespace {

const char* const kKeys[] = {"instance_count",
                             "max_queue_size",
                             "max_execution_seconds",
                             "default_timeout_microseconds",
                             "warmup_runs",
                             "dynamic_batching",
                             "max_queue_delay_microseconds",
                             "response_cache",
                             "sequence_batching",
                             "max_sequence_idle_microseconds",
                             "max_concurrent_sequences",
                             nullptr};

bool ParseInt(const std::string& text, int64_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  long long v = strtoll(text.c_str(), &end, 10);
  if (*end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace

const char* const* ModelSettingKeys() { return kKeys; }

Status CheckModelSetting(const std::string& key, const std::string& value) {
  bool known = false;
  for (const char* const* k = kKeys; *k != nullptr; ++k) known |= key == *k;
  if (!known) {
    std::string keys;
    for (const char* const* k = kKeys; *k != nullptr; ++k) keys += (keys.empty() ? "" : ", ") + std::string(*k);
    return InvalidArgument("unknown model setting '" + key + "' (known: " + keys + ")");
  }
  int64_t n;
  if (key == "dynamic_batching" || key == "response_cache" || key == "sequence_batching") {
    if (value != "true" && value != "false") {
      return InvalidArgument("model setting " + key + " must be true or false, got '" + value + "'");
    }
  } else if (!ParseInt(value, &n)) {
    return InvalidArgument("model setting " + key + " must be an integer >= 0, got '" + value + "'");
  }
  return Status::Ok();
}

StatusOr<ModelSettings> ResolveModelSettings(const Manifest& m, const ServingDefaults& defaults,
                                             size_t interpreters) {
  ModelSettings s;
  int64_t instances = m.instance_count;
  int64_t queue = m.max_queue_size > 0 ? m.max_queue_size : static_cast<int64_t>(defaults.max_queue_size);
  int64_t execution = m.max_execution_seconds > 0 ? m.max_execution_seconds : defaults.max_execution_seconds;
  int64_t timeout = m.default_timeout_microseconds;
  s.warmup_runs = defaults.warmup_runs;
  s.batching = m.batching;
  s.response_cache = m.response_cache;
  s.sequences = m.sequence_batching;
  auto it = defaults.overrides.find(m.name);
  if (it != defaults.overrides.end()) {
    for (const auto& [key, value] : it->second) {
      MANYPY_RETURN_IF_ERROR(CheckModelSetting(key, value));
      int64_t n = 0;
      ParseInt(value, &n);
      if (key == "instance_count") instances = n;
      else if (key == "max_queue_size") queue = n;
      else if (key == "max_execution_seconds") execution = n;
      else if (key == "default_timeout_microseconds") timeout = n;
      else if (key == "warmup_runs") s.warmup_runs = n;
      else if (key == "max_queue_delay_microseconds") s.batching.max_queue_delay_microseconds = n;
      else if (key == "dynamic_batching") s.batching.dynamic = value == "true";
      else if (key == "response_cache") s.response_cache = value == "true";
      else if (key == "sequence_batching") s.sequences.enabled = value == "true";
      else if (key == "max_sequence_idle_microseconds")
        s.sequences.max_sequence_idle_microseconds = n;
      else if (key == "max_concurrent_sequences") s.sequences.max_concurrent_sequences = n;
    }
  }
  if (std::string problem = DynamicBatchingProblem(s.batching.dynamic, m.max_batch_size);
      !problem.empty()) {
    return InvalidArgument("model '" + m.name + "': " + problem + " (a batch dimension)");
  }
  if (m.streaming && s.batching.dynamic) {
    return InvalidArgument("model '" + m.name +
                           "' streams its responses: it cannot batch dynamically "
                           "(dynamic_batching=true)");
  }
  if (m.streaming && s.response_cache) {
    return InvalidArgument("model '" + m.name +
                           "' streams its responses: they cannot be cached (response_cache=true)");
  }
  if (s.sequences.enabled) {
    std::string problem = SequenceBatchingProblem(m, s.batching.dynamic, s.response_cache);
    if (!problem.empty()) {
      return InvalidArgument("model '" + m.name + "' has sequence_batching, but " + problem);
    }
    if (s.sequences.max_sequence_idle_microseconds < 1 ||
        s.sequences.max_concurrent_sequences < 1) {
      return InvalidArgument("model '" + m.name +
                             "': max_sequence_idle_microseconds and max_concurrent_sequences "
                             "must be >= 1");
    }
  }
  if (queue < 1) return InvalidArgument("model '" + m.name + "': max_queue_size must be >= 1");
  s.instance_count = instances == 0 ? interpreters
                                    : std::min<size_t>(static_cast<size_t>(instances), interpreters);
  s.max_queue_size = static_cast<size_t>(queue);
  s.max_execution = std::chrono::seconds(execution);
  s.default_timeout = std::chrono::microseconds(timeout);
  return s;
}

}  // namespace manypy
