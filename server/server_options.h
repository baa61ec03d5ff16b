// ServerOptions: manypy-server's settings, from flags and an optional config
// file (one `flag=value` per line, `#` comments; flags given later win).
// Plain values; thread-safe once parsed.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "server/flag_reader.h"
#include "server/lifecycle/model_settings.h"
#include "server/tracing/tracing.h"

namespace manypy {

struct ServerOptions {
  std::string model_repository;  ///< default: ../model-repository beside the binary
  std::string grpc_address = kDefaultAddress;
  int grpc_port = kDefaultGrpcPort;
  bool http = true;  ///< the KServe v2 REST endpoint on
  std::string http_address = kDefaultAddress;
  int http_port = kDefaultHttpPort;  ///< 0 picks a free port
  size_t interpreters = 0;  ///< 0: one per core
  bool explicit_model_control = false;
  bool on_demand = false;  ///< --model-control-mode=on-demand
  std::vector<std::string> load_models;
  int64_t model_memory_budget_bytes = 0;  ///< 0: none
  size_t max_loaded_models = 0;           ///< 0: no cap
  int64_t response_cache_bytes = 0;       ///< 0: no response cache
  bool allow_client_shm = false;          ///< clients may use system shared memory
  bool allow_client_shm_remote = false;   ///< ... over TLS or from another host too
  int max_message_bytes = 64 << 20;
  int grace_period_seconds = 30;
  std::string log_level = "info";
  std::string log_format = "text";  ///< "text" or "json" (one object per line)
  double access_log_fraction = 0;   ///< of requests logged, sampled; 0: none
  bool metrics = true;              ///< Prometheus endpoint on
  std::string metrics_address = kDefaultAddress;
  int metrics_port = kDefaultMetricsPort;  ///< GET /metrics; 0 picks a free port
  std::string cache_dir;
  std::string compile_cache_dir;  ///< Inductor's cache (torch.compile); empty: the pool's default
  /// Bearer tokens (SECURITY.md): empty paths, none. The management token, when
  /// set, is the only one the repository API accepts.
  std::string auth_token_file;
  std::string management_token_file;
  /// TLS (PEM files): with a certificate and key, gRPC and HTTP serve TLS only;
  /// with a client CA too, clients must present a certificate it signed.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  /// Limits on what clients (and the repository) can make the server hold.
  int64_t max_archive_bytes = int64_t{32} << 30;  ///< an archive's file size
  int http_max_connections = 1024;                ///< open HTTP connections; more are closed
  int http_read_timeout_seconds = 30;  ///< to send a request's header and body; then closed
  int grpc_max_connections = 1024;                ///< open gRPC connections; more are closed
  int grpc_max_concurrent_streams = 1024;         ///< per HTTP/2 connection; more wait
  /// A gRPC connection gets a graceful GOAWAY after this long (its client
  /// reconnects without a failed call), so that a replaced serving process
  /// (SIGHUP) loses its clients; 0: never.
  int grpc_max_connection_age_seconds = 30;
  /// Queue, execution-limit and warm-up defaults and per-model overrides.
  ServingDefaults serving;
  /// Run to completion (Dispatcher::SubmitOrRunHere) for models whose calls
  /// lately took less than this; 0: off (every call goes to a worker).
  int64_t run_to_completion_below_us = 0;
  /// ... and only into a dispatcher that is quiet: nothing else queued or
  /// running, no execution ended within this long (Dispatcher::Options::run_here_quiet).
  int64_t run_to_completion_quiet_us = 50;
  /// OpenTelemetry tracing (off by default; refused where not built in).
  TracingOptions tracing;
  /// Read by the launcher (supervisor/launch_options.h), which runs a small
  /// parent that holds the listening sockets and restarts the serving process
  /// when it dies of a signal; accepted and ignored by the serving process.
  bool supervisor = true;
  /// Where crashes are recorded and models quarantined (docs/operations.md, "Crashes").
  std::string crash_state_dir = "/tmp/manypy-crash-state";
  bool clear_quarantine = false;  ///< forget every crash and quarantine at start
};

/// The --help text.
std::string ServerUsage();

/// Parses argv (flag_reader.h's grammar). `*help` is set when --help was given,
/// `*version` when --version was (refused as unknown when `version` is null).
/// INVALID_ARGUMENT names the bad flag or value.
StatusOr<ServerOptions> ParseServerOptions(int argc, char** argv, bool* help,
                                           bool* version = nullptr);

}  // namespace manypy
