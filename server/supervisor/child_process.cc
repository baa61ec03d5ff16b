#include "server/supervisor/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>

#include "server/log.h"

namespace manypy {

std::optional<ChildProcess> ChildProcess::Start(const std::string& binary, char** argv,
                                                SupervisedChild handover,
                                                const sigset_t& signal_mask) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) {
    Log(LogLevel::kError, "supervisor: cannot make the ready pipe");
    return std::nullopt;
  }
  handover.ready_fd = ready[1];
  // Encoded before fork: the child may only make async-signal-safe calls.
  setenv(kSupervisorEnvironment, EncodeHandover(handover).c_str(), 1);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // the parent killed (SIGKILL too): the child goes with it
    if (getppid() != parent) _exit(1);  // it died before the line above
    for (const auto* fds : {&handover.grpc_fds, &handover.http_fds, &handover.metrics_fds}) {
      for (int fd : *fds) fcntl(fd, F_SETFD, 0);  // inherited across exec
    }
    fcntl(handover.ready_fd, F_SETFD, 0);
    // SIGTERM and SIGINT stay blocked across exec: the serving process blocks
    // them itself first thing, and one sent before that must wait for it (it
    // then stops its start, StartupStop) rather than kill it by the default action.
    sigset_t mask = signal_mask;
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    // By path, not a descriptor kept open: SIGHUP's new child runs what is on disk now.
    execv(binary.c_str(), argv);
    _exit(127);
  }
  unsetenv(kSupervisorEnvironment);
  close(ready[1]);
  if (pid < 0) {
    close(ready[0]);
    Log(LogLevel::kError, "supervisor: cannot start the serving process (fork failed)");
    return std::nullopt;
  }
  ChildProcess child;
  child.pid = pid;
  child.ready_fd = ready[0];
  child.started = std::chrono::steady_clock::now();
  return child;
}

bool ChildProcess::TakeReady() {
  char byte = 0;
  const bool said = ready_fd >= 0 && read(ready_fd, &byte, 1) == 1;
  CloseReadyPipe();
  ready = ready || said;
  return said;
}

void ChildProcess::CloseReadyPipe() {
  if (ready_fd >= 0) close(ready_fd);
  ready_fd = -1;
}

double ChildProcess::SecondsSinceStart() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

}  // namespace manypy
