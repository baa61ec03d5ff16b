// ChildProcess: one serving process the supervisor started (fork + exec of the
// serving binary with the handover, supervised_child.h) and the read end of
// its ready pipe. Single-threaded: the supervisor's loop owns every one.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

#include "server/supervisor/supervised_child.h"

namespace manypy {

struct ChildProcess {
  pid_t pid = -1;
  int ready_fd = -1;  ///< the pipe's read end; -1 once it said ready or closed
  bool ready = false;
  std::chrono::steady_clock::time_point started;

  /// Starts `binary` with `argv` (argv[0] included) and `handover` (its
  /// ready_fd is made here); the child gets `signal_mask` and SIGKILL when
  /// this process dies. nullopt, after logging why, when it cannot be started.
  static std::optional<ChildProcess> Start(const std::string& binary, char** argv,
                                           SupervisedChild handover, const sigset_t& signal_mask);

  /// Reads the ready pipe once it polls readable: true when the child said
  /// ready now; the pipe is closed either way (closed without a word: dying).
  bool TakeReady();
  /// Closes the ready pipe if still open.
  void CloseReadyPipe();
  double SecondsSinceStart() const;
};

}  // namespace manypy
