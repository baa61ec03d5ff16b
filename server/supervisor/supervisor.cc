#include "server/supervisor/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

#include "server/crash/crash_record.h"
#include "server/grpc/listening_sockets.h"
#include "server/log.h"
#include "server/supervisor/supervised_child.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;
// A child that dies before it is ready is restarted after a delay that
// doubles from the first to the cap; one that got ready is restarted at once.
constexpr double kFirstBackoffSeconds = 0.5;
constexpr double kMaxBackoffSeconds = 30;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string Seconds(double s) { return FormatSecondsFixed(s) + " s"; }

// fork + exec of this binary with the handover in its environment; -1 on failure.
pid_t StartChild(char** argv, const SupervisedChild& handover, const sigset_t& child_mask) {
  setenv(kSupervisorEnvironment, EncodeHandover(handover).c_str(), 1);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) {
    unsetenv(kSupervisorEnvironment);
    return pid;
  }
  // The child: only async-signal-safe calls until exec.
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // the parent killed (SIGKILL too): the child goes with it
  if (getppid() != parent) _exit(1);  // it died before the line above
  for (const auto* fds : {&handover.grpc_fds, &handover.http_fds, &handover.metrics_fds}) {
    for (int fd : *fds) fcntl(fd, F_SETFD, 0);  // inherited across exec
  }
  fcntl(handover.ready_fd, F_SETFD, 0);
  sigprocmask(SIG_SETMASK, &child_mask, nullptr);
  execv("/proc/self/exe", argv);
  _exit(127);
}

int ExitStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int RunSupervisor(char** argv, const ServerOptions& options) {
  // The sockets, opened once for every child: connections made while a child
  // restarts wait in their accept queues.
  std::vector<ListeningSockets> held;
  SupervisedChild handover;
  auto listen = [&](const std::string& what, const std::string& host, int port,
                    std::vector<int>* fds) {
    auto sockets = ListeningSockets::Listen(host, port, what);
    if (!sockets.ok()) {
      Log(LogLevel::kError, sockets.status().message());
      return false;
    }
    // HTTP and metrics accept on one socket (the first address of a name):
    // another one, never accepted on, would hold its clients forever.
    if (what != "gRPC") sockets->KeepFirstOnly();
    *fds = sockets->fds();
    held.push_back(std::move(*sockets));
    return true;
  };
  if (!listen("gRPC", options.grpc_address, options.grpc_port, &handover.grpc_fds)) return 1;
  if (options.http && !listen("HTTP", options.http_address, options.http_port, &handover.http_fds)) {
    return 1;
  }
  if (options.metrics &&
      !listen("metrics", options.metrics_address, options.metrics_port, &handover.metrics_fds)) {
    return 1;
  }
  // Signals arrive through a signalfd, polled beside the child's ready pipe.
  sigset_t handled, original;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, &original);
  const int signals = signalfd(-1, &handled, SFD_CLOEXEC);
  if (signals < 0) {
    Log(LogLevel::kError, "supervisor: cannot open a signalfd");
    return 1;
  }

  std::map<std::string, int64_t> restarts;
  double backoff = 0;
  bool stopping = false;
  for (int attempt = 0;; ++attempt) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
      Log(LogLevel::kError, "supervisor: cannot make the ready pipe");
      return 1;
    }
    handover.ready_fd = ready[1];
    handover.restarts.assign(restarts.begin(), restarts.end());
    const Clock::time_point started = Clock::now();
    const pid_t child = StartChild(argv, handover, original);
    close(ready[1]);
    if (child < 0) {
      close(ready[0]);
      Log(LogLevel::kError, "supervisor: cannot start the serving process");
      return 1;
    }
    if (attempt == 0) {
      Log(LogLevel::kInfo, "supervisor: serving process " + std::to_string(child) +
                               " started; this process (" + std::to_string(getpid()) +
                               ") holds the listening sockets and restarts it if it crashes");
    }
    bool was_ready = false, ready_open = true;
    int status = 0;
    // Until the child exits: its readiness, and the signals to pass on.
    for (bool exited = false; !exited;) {
      pollfd fds[2] = {{signals, POLLIN, 0}, {ready[0], POLLIN, 0}};
      if (poll(fds, ready_open ? 2 : 1, -1) < 0) continue;
      if (ready_open && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
        char byte = 0;
        was_ready = read(ready[0], &byte, 1) == 1;  // else closed without a word: it is dying
        ready_open = false;
        if (was_ready && attempt > 0) {
          Log(LogLevel::kInfo, "supervisor: serving process " + std::to_string(child) +
                                   " ready " + Seconds(SecondsSince(started)) + " after its start");
        }
      }
      if ((fds[0].revents & POLLIN) == 0) continue;
      signalfd_siginfo info{};
      if (read(signals, &info, sizeof(info)) != sizeof(info)) continue;
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGTERM || sig == SIGINT) {
        if (!stopping) {
          Log(LogLevel::kInfo, std::string("supervisor: ") + SignalName(sig) +
                                   ": passed on to the serving process " + std::to_string(child));
        }
        stopping = true;
        kill(child, sig);
      } else if (sig == SIGHUP) {
        Log(LogLevel::kWarning, "supervisor: SIGHUP ignored (a zero-downtime restart is not "
                                "supported yet; SIGTERM stops the server)");
      }
      // SIGCHLD (or any signal): has the child exited? Any other process is
      // reaped too: as a container's PID 1 the supervisor inherits orphans
      // (a model's subprocesses), which would otherwise stay zombies.
      int any_status = 0;
      for (pid_t gone; (gone = waitpid(-1, &any_status, WNOHANG)) > 0;) {
        if (gone == child) {
          exited = true;
          status = any_status;
        }
      }
    }
    close(ready[0]);
    const double lived = SecondsSince(started);
    if (stopping || WIFEXITED(status)) {
      if (!stopping || ExitStatus(status) != 0) {
        Log(stopping ? LogLevel::kInfo : LogLevel::kError,
            "supervisor: the serving process " + std::to_string(child) +
                (WIFEXITED(status) ? " exited with status " + std::to_string(WEXITSTATUS(status))
                                   : std::string(" died of ") + SignalName(WTERMSIG(status))) +
                (stopping ? "" : "; the supervisor exits with it (only a death by a signal is "
                                 "restarted)"));
      }
      return ExitStatus(status);
    }
    // Died of a signal: a crash, the OOM killer, an operator's kill.
    const std::string name = SignalName(WTERMSIG(status));
    ++restarts[name];
    backoff = was_ready ? 0 : std::min(kMaxBackoffSeconds, std::max(kFirstBackoffSeconds, 2 * backoff));
    Log(LogLevel::kError,
        "supervisor: the serving process " + std::to_string(child) + " died of " + name +
            (WCOREDUMP(status) ? " (core dumped)" : "") + " after " + Seconds(lived) +
            (was_ready ? ", while serving" : ", before it was ready") + "; restart " +
            std::to_string(restarts[name]) + " for " + name +
            (backoff > 0 ? " in " + Seconds(backoff) + " (it keeps dying at start)" : " now"));
    // The back-off, still answering SIGTERM (nothing to drain: no child runs).
    const Clock::time_point until = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                       std::chrono::duration<double>(backoff));
    while (Clock::now() < until) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      pollfd p{signals, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
      signalfd_siginfo info{};
      if (read(signals, &info, sizeof(info)) != sizeof(info)) continue;
      if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) {
        Log(LogLevel::kInfo, std::string("supervisor: ") + SignalName(static_cast<int>(info.ssi_signo)) +
                                 " while waiting to restart: exiting");
        return 128 + WTERMSIG(status);
      }
    }
  }
}

}  // namespace manypy
