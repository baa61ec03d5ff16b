// ModelSettings: how the server runs one model version, resolved from its
// manifest, the server's defaults and per-model overrides given on the
// command line (--model-config NAME:KEY=VALUE). Plain values; thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "common/status.h"
#include "package_format/manifest.h"

namespace manypy {

struct ServingDefaults {
  size_t max_queue_size = 256;
  int64_t max_execution_seconds = 60;
  int64_t warmup_runs = 1;
  /// model name -> setting -> value, from --model-config.
  std::map<std::string, std::map<std::string, std::string>> overrides;
};

struct ModelSettings {
  size_t instance_count = 1;  ///< 1..interpreters
  size_t max_queue_size = 256;
  std::chrono::microseconds max_execution{0};    ///< zero: no limit
  std::chrono::microseconds default_timeout{0};  ///< zero: none
  int64_t warmup_runs = 1;
  BatchingSpec batching;  ///< `batching.dynamic`: whether requests are joined
  /// Answers repeated requests from the server's response cache (never for a
  /// streaming model).
  bool response_cache = false;
  /// Stateful sequences (`enabled`), their idle timeout and concurrency limit.
  SequenceBatchingSpec sequences;
};

/// The settings --model-config accepts.
const char* const* ModelSettingKeys();
/// INVALID_ARGUMENT naming the key or value if `key=value` is not a valid override.
Status CheckModelSetting(const std::string& key, const std::string& value);

/// INVALID_ARGUMENT naming the model and the setting for an override that
/// does not fit the model (e.g. batching a model without a batch dimension).
StatusOr<ModelSettings> ResolveModelSettings(const Manifest& manifest,
                                             const ServingDefaults& defaults,
                                             size_t interpreters);

}  // namespace manypy
