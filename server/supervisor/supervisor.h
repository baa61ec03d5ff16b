// Supervisor: manypy-server's parent process. Opens the listening sockets
// (gRPC, HTTP, metrics), runs the serving process (this binary again, exec'd)
// as its child with those sockets, restarts it at once when it dies of a
// signal, forwards SIGTERM/SIGINT and exits with its status. Single-threaded:
// it runs in main before anything starts a thread, loads a model or Python.
#pragma once

#include "server/server_options.h"

namespace manypy {

/// Runs the supervisor until the child has exited for good; returns the exit
/// status for main: the child's (its exit code, or 128 + the signal that ended
/// it while stopping), 1 when the sockets cannot be opened or the child
/// cannot be started. `argv` is passed to each child unchanged.
int RunSupervisor(char** argv, const ServerOptions& options);

}  // namespace manypy
