// SupervisedChild: what the supervisor hands the serving process it starts
// (supervisor.h): the listening sockets it inherits, a pipe to say "ready" on,
// and how many restarts came before it. An internal contract between the
// launcher (manypy-server) and the serving binary (manypy-serving), passed in
// one environment variable. Not thread-safe: main's thread takes it at start.
#pragma once

#include <signal.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace manypy {

/// The environment variable the supervisor sets for its child:
/// "grpc=3,4;http=5;metrics=6;ready=7;switch=1;reloads=2;restarts=SIGSEGV:1,SIGKILL:2"
/// (a role with no sockets is left out; ready is the pipe's write end; switch
/// only for a child started by SIGHUP beside one that serves; reloads only
/// when not 0).
constexpr const char* kSupervisorEnvironment = "MANYPY_SUPERVISOR_HANDOVER";

/// What the supervisor sends a serving process a newer one has replaced
/// (SIGHUP): stop accepting, let clients move to the new one, finish what is
/// in flight, exit. Its usual drain (SIGTERM) refuses new requests instead.
constexpr int kStepAsideSignal = SIGUSR2;

struct SupervisedChild {
  std::vector<int> grpc_fds;
  std::vector<int> http_fds;
  std::vector<int> metrics_fds;
  int ready_fd = -1;
  /// Started beside a serving process (SIGHUP): accepts nothing until ready,
  /// the metrics endpoint included, since the old one still serves.
  bool switching = false;
  /// Restarts before this child, by the signal that ended the one before.
  std::vector<std::pair<std::string, int64_t>> restarts;
  /// SIGHUP replacements that took over serving before this child, and this
  /// one if SIGHUP started it (it counts once it serves: only then is its
  /// /metrics reachable).
  int64_t reloads = 0;
};

/// The handover encoded for kSupervisorEnvironment.
std::string EncodeHandover(const SupervisedChild& child);
/// The handover `text` encodes; nullopt when it is malformed.
std::optional<SupervisedChild> DecodeHandover(const std::string& text);

/// This process's handover, when a supervisor started it (nullopt otherwise):
/// read from the environment, which is then cleared of it (a model's
/// subprocess must not take the sockets for its own), and its sockets made
/// close-on-exec again.
std::optional<SupervisedChild> TakeSupervisedChild();

/// Tells the supervisor this child serves (readiness true from now on):
/// one byte on the ready pipe, which is then closed. Idempotent.
void NotifySupervisorReady(SupervisedChild* child);

}  // namespace manypy
