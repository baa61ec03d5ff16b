// Supervisor: manypy-server's parent process (the launcher). Opens the
// listening sockets (gRPC, HTTP, metrics), runs the serving binary as its
// child with those sockets, restarts it at once when it dies of a signal,
// replaces it with a new one on SIGHUP without closing a socket, forwards
// SIGTERM/SIGINT and exits with its status. Single-threaded.
#pragma once

#include <string>

#include "server/supervisor/launch_options.h"

namespace manypy {

/// Runs the supervisor until the serving process has exited for good; returns
/// the exit status for main: the child's (its exit code, or 128 + the signal
/// that ended it while stopping), 1 when the sockets cannot be opened or the
/// child cannot be started. Each child runs `serving_binary` with `argv`.
int RunSupervisor(const std::string& serving_binary, char** argv, const LaunchOptions& options);

}  // namespace manypy
