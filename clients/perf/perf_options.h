// PerfOptions: the settings of one manypy-perf run, parsed from the command
// line (defaults here). A plain value type.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "clients/cpp/tls_options.h"
#include "common/status.h"

namespace manypy::perf {

struct PerfOptions {
  std::string model;
  std::string model_version;
  std::string url = "localhost:8001";  ///< -i http without -u: localhost:8000
  std::string protocol = "grpc";      ///< "grpc" or "http" (KServe v2 REST, binary data)
  /// Closed loop: one step per level, that many requests always in flight.
  std::vector<int> concurrency = {1};
  /// Open loop (when non-empty, replaces concurrency): one step per rate, requests/s.
  std::vector<double> rates;
  bool poisson = true;       // open loop: exponential gaps; false: fixed interval
  int max_threads = 16;      // open loop: dispatcher pool size
  double warmup_seconds = 2;
  double window_seconds = 5;
  double stability_percent = 10;
  int max_windows = 10;
  int64_t batch_size = 1;
  int timeout_ms = 30000;
  int string_length = 8;     // BYTES elements of random data
  /// --input NAME=FILE: input name -> its raw files, one per input set (a name
  /// given once: one file, shared by every set). See InputSetCount.
  std::map<std::string, std::vector<std::string>> input_files;
  std::string csv_path;      // empty: stdout
  std::string json_path;     // empty: none
  std::string window_log_path;  // --window-log: one JSON line per window; empty: none
  client::TlsOptions tls;    // --tls-ca/--tls-cert/--tls-key or an https:// URL; plain by default
  std::string auth_token_file;  // --auth-token-file: sent as a bearer token; empty: none
  bool streaming = false;    // --streaming: each request a ModelStreamInfer stream (gRPC)
  bool async = false;        // --async: closed loop from one thread (async_grpc_load.h)
  bool help = false;
};

/// Parses argv; InvalidArgument naming the bad flag.
StatusOr<PerfOptions> ParsePerfOptions(int argc, char** argv);

/// How many input sets the --input files make: the number of files of every
/// input named more than once (they must agree; ParsePerfOptions refuses a
/// mismatch), else 1.
size_t InputSetCount(const PerfOptions& options);

/// The --help text.
std::string PerfUsage();

}  // namespace manypy::perf
