// SupervisedChild: what the supervisor hands the serving process it starts
// (supervisor.h): the listening sockets it inherits, a pipe to say "ready" on,
// and how many restarts came before it. An internal contract between the two
// halves of one binary, passed in one environment variable. Not thread-safe:
// main's thread takes it once at start.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace manypy {

/// The environment variable the supervisor sets for its child:
/// "grpc=3,4;http=5;metrics=6;ready=7;restarts=SIGSEGV:1,SIGKILL:2"
/// (a role with no sockets is left out; ready is the pipe's write end).
constexpr const char* kSupervisorEnvironment = "MANYPY_SUPERVISOR_HANDOVER";

struct SupervisedChild {
  std::vector<int> grpc_fds;
  std::vector<int> http_fds;
  std::vector<int> metrics_fds;
  int ready_fd = -1;
  /// Restarts before this child, by the signal that ended the one before.
  std::vector<std::pair<std::string, int64_t>> restarts;
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
