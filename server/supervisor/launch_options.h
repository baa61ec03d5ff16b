// LaunchOptions: the few flags the launcher (manypy-server's parent process)
// reads to bind the listening sockets and log; the serving process reads and
// checks every flag itself (server_options.h). Plain values; thread-compatible.
#pragma once

#include <string>

#include "common/status.h"
#include "server/flag_reader.h"

namespace manypy {

struct LaunchOptions {
  std::string grpc_address = kDefaultAddress;
  int grpc_port = kDefaultGrpcPort;
  bool http = true;
  std::string http_address = kDefaultAddress;
  int http_port = kDefaultHttpPort;
  bool metrics = true;
  std::string metrics_address = kDefaultAddress;
  int metrics_port = kDefaultMetricsPort;
  bool supervisor = true;  ///< false: --no-supervisor
  std::string log_level = "info";
  std::string log_format = "text";
  /// --help or --version: the serving binary answers (it knows every flag).
  bool forward = false;
};

/// The launcher's flags from argv (flag_reader.h's grammar, --config files
/// included); every other flag is left to the serving process. INVALID_ARGUMENT
/// or NOT_FOUND when argv cannot be read or one of these flags has a bad value.
StatusOr<LaunchOptions> ReadLaunchOptions(int argc, char** argv);

}  // namespace manypy
