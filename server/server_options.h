// ServerOptions: manypy-server's settings, from flags and an optional config
// file (one `flag=value` per line, `#` comments; flags given later win).
// Plain values; thread-safe once parsed.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "server/models/model_settings.h"

namespace manypy {

struct ServerOptions {
  std::string model_repository;  ///< default: ../model-repository beside the binary
  std::string grpc_address = "0.0.0.0";
  int grpc_port = 8001;
  size_t interpreters = 0;  ///< 0: one per core
  bool explicit_model_control = false;
  std::vector<std::string> load_models;
  int max_message_bytes = 64 << 20;
  int grace_period_seconds = 30;
  std::string log_level = "info";
  std::string cache_dir;
  /// Queue, execution-limit and warm-up defaults and per-model overrides.
  ServingDefaults serving;
};

/// The --help text.
std::string ServerUsage();

/// Parses argv. `*help` is set when --help was given. INVALID_ARGUMENT names
/// the bad flag or value.
StatusOr<ServerOptions> ParseServerOptions(int argc, char** argv, bool* help);

}  // namespace manypy
