#include "server/supervisor/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "server/crash/crash_record.h"
#include "server/grpc/listening_sockets.h"
#include "server/log.h"
#include "server/supervisor/child_process.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;
// A child that dies before it is ready is restarted after a delay that
// doubles from the first to the cap; one that got ready is restarted at once.
constexpr double kFirstBackoffSeconds = 0.5;
constexpr double kMaxBackoffSeconds = 30;

std::string Seconds(double s) { return FormatSecondsFixed(s) + " s"; }
std::string Pid(pid_t pid) { return std::to_string(pid); }

int ExitStatus(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string HowItEnded(int status) {
  return WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                           : std::string("died of ") + SignalName(WTERMSIG(status)) +
                                 (WCOREDUMP(status) ? " (core dumped)" : "");
}

// The children and what to do when each event comes: one object, one thread.
// `serving` is the child readiness follows; `replacement` the one SIGHUP
// started beside it, until it is ready (then it serves) or dies (then nothing
// changed); `retiring` the ones replaced, draining.
class Supervisor {
 public:
  Supervisor(std::string binary, char** argv, SupervisedChild sockets, sigset_t child_mask)
      : binary_(std::move(binary)), argv_(argv), sockets_(std::move(sockets)), child_mask_(child_mask) {}

  // Until every child has exited after a stop, or the serving one exited by itself.
  int Run(int signals) {
    if (!StartServing()) return 1;
    Log(LogLevel::kInfo, "supervisor: serving process " + Pid(serving_->pid) + " started; this process (" +
                             Pid(getpid()) + ") holds the listening sockets, restarts it if it crashes "
                             "and replaces it on SIGHUP");
    while (!exit_status_) {
      std::vector<pollfd> fds = {{signals, POLLIN, 0}};
      if (serving_ && serving_->ready_fd >= 0) fds.push_back({serving_->ready_fd, POLLIN, 0});
      if (replacement_ && replacement_->ready_fd >= 0) fds.push_back({replacement_->ready_fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), PollTimeoutMs()) < 0) continue;
      for (size_t i = 1; i < fds.size(); ++i) {
        if ((fds[i].revents & (POLLIN | POLLHUP)) != 0) OnReadyPipe(fds[i].fd);
      }
      if ((fds[0].revents & POLLIN) != 0) {
        signalfd_siginfo info{};
        if (read(signals, &info, sizeof(info)) == sizeof(info)) OnSignal(static_cast<int>(info.ssi_signo));
      }
      ReapChildren();
      if (!serving_ && !stopping_ && restart_at_ && Clock::now() >= *restart_at_) {
        restart_at_.reset();
        if (!StartServing()) return 1;
      }
      if (stopping_ && !serving_ && !replacement_ && retiring_.empty()) exit_status_ = stop_status_;
    }
    return *exit_status_;
  }

 private:
  bool StartServing() {
    serving_ = StartChild(/*switching=*/false);
    return serving_.has_value();
  }

  // A serving process with the listening sockets and the counts so far;
  // `switching`: SIGHUP's, beside the one that serves, which counts itself
  // among the reloads (it is seen only if it takes over).
  std::optional<ChildProcess> StartChild(bool switching) const {
    SupervisedChild handover = sockets_;
    handover.switching = switching;
    handover.restarts.assign(restarts_.begin(), restarts_.end());
    handover.reloads = reloads_ + (switching ? 1 : 0);
    return ChildProcess::Start(binary_, argv_, std::move(handover), child_mask_);
  }

  int PollTimeoutMs() const {
    if (!restart_at_ || serving_) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*restart_at_ - Clock::now());
    return static_cast<int>(std::max<int64_t>(0, left.count()) + 1);
  }

  void OnReadyPipe(int fd) {
    if (serving_ && fd == serving_->ready_fd) {
      if (serving_->TakeReady() && restarted_) {
        Log(LogLevel::kInfo, "supervisor: serving process " + Pid(serving_->pid) + " ready " +
                                 Seconds(serving_->SecondsSinceStart()) + " after its start");
      }
    } else if (replacement_ && fd == replacement_->ready_fd && replacement_->TakeReady()) {
      // The switch: the new one accepts from now on; the old one stops
      // accepting at once and finishes what it has.
      Log(LogLevel::kInfo, "supervisor: SIGHUP: serving process " + Pid(replacement_->pid) + " ready " +
                               Seconds(replacement_->SecondsSinceStart()) + " after its start; the old one (" +
                               Pid(serving_->pid) + ") stops accepting and drains");
      kill(serving_->pid, kStepAsideSignal);
      retiring_.push_back(serving_->pid);
      ++reloads_;
      serving_ = std::move(replacement_);
      replacement_.reset();
    }
  }

  void OnSignal(int sig) {
    if (sig == SIGTERM || sig == SIGINT) {
      if (!serving_ && !replacement_ && retiring_.empty()) {
        Log(LogLevel::kInfo, std::string("supervisor: ") + SignalName(sig) + " while waiting to restart: exiting");
      } else if (!stopping_) {
        Log(LogLevel::kInfo, std::string("supervisor: ") + SignalName(sig) + ": passed on to the serving process" +
                                 (serving_ ? " " + Pid(serving_->pid) : std::string()) +
                                 (replacement_ || !retiring_.empty() ? " and the others it runs" : ""));
      }
      stopping_ = true;
      for (const auto* child : {&serving_, &replacement_}) {
        if (*child) kill((*child)->pid, sig);
      }
      for (pid_t pid : retiring_) kill(pid, sig);
    } else if (sig == SIGHUP) {
      OnRestartRequest();
    }
  }

  void OnRestartRequest() {
    if (stopping_) return;
    if (replacement_) {
      Log(LogLevel::kWarning, "supervisor: SIGHUP ignored: serving process " + Pid(replacement_->pid) +
                                  " started by the last one is not ready yet");
      return;
    }
    if (!serving_ || !serving_->ready) {
      Log(LogLevel::kWarning, "supervisor: SIGHUP ignored: the serving process is starting (not ready "
                              "yet); send it again once it is ready");
      return;
    }
    replacement_ = StartChild(/*switching=*/true);
    if (replacement_) {
      Log(LogLevel::kInfo, "supervisor: SIGHUP: starting serving process " + Pid(replacement_->pid) + " (" +
                               binary_ + ") beside " + Pid(serving_->pid) +
                               ", which serves until the new one is ready");
    }
  }

  // SIGCHLD, or any wake-up: who exited? Any other process is reaped too: as
  // a container's PID 1 the supervisor inherits orphans (a model's
  // subprocesses), which would otherwise stay zombies.
  void ReapChildren() {
    int status = 0;
    for (pid_t gone; (gone = waitpid(-1, &status, WNOHANG)) > 0;) {
      if (serving_ && gone == serving_->pid) {
        OnServingExit(status);
      } else if (replacement_ && gone == replacement_->pid) {
        replacement_->CloseReadyPipe();
        Log(stopping_ ? LogLevel::kInfo : LogLevel::kError,
            "supervisor: SIGHUP: the new serving process " + Pid(gone) + " " + HowItEnded(status) +
                " before it was ready" + (stopping_ ? "" : "; " + Pid(serving_->pid) + " keeps serving "
                "(its log above says why; a model it crashed on is recorded as any crash)"));
        replacement_.reset();
      } else if (auto it = std::find(retiring_.begin(), retiring_.end(), gone); it != retiring_.end()) {
        retiring_.erase(it);
        Log(LogLevel::kInfo, "supervisor: the replaced serving process " + Pid(gone) + " " + HowItEnded(status));
      }
    }
  }

  void OnServingExit(int status) {
    const ChildProcess gone = *serving_;
    serving_->CloseReadyPipe();
    serving_.reset();
    if (stopping_) {
      if (ExitStatus(status) != 0) {
        Log(LogLevel::kInfo, "supervisor: the serving process " + Pid(gone.pid) + " " + HowItEnded(status));
      }
      stop_status_ = ExitStatus(status);
      return;
    }
    if (replacement_) {  // SIGHUP's child, not ready yet, takes its place
      Log(LogLevel::kError, "supervisor: the serving process " + Pid(gone.pid) + " " + HowItEnded(status) +
                                " while " + Pid(replacement_->pid) + " (SIGHUP) starts; that one serves when ready");
      serving_ = std::move(replacement_);
      replacement_.reset();
      ++reloads_;  // as its handover counted it
      restarted_ = true;
      return;
    }
    if (WIFEXITED(status)) {
      Log(LogLevel::kError, "supervisor: the serving process " + Pid(gone.pid) + " " + HowItEnded(status) +
                                "; the supervisor exits with it (only a death by a signal is restarted)");
      exit_status_ = ExitStatus(status);
      return;
    }
    // Died of a signal: a crash, the OOM killer, an operator's kill.
    const std::string name = SignalName(WTERMSIG(status));
    ++restarts_[name];
    backoff_ = gone.ready ? 0 : std::min(kMaxBackoffSeconds, std::max(kFirstBackoffSeconds, 2 * backoff_));
    Log(LogLevel::kError,
        "supervisor: the serving process " + Pid(gone.pid) + " " + HowItEnded(status) + " after " +
            Seconds(gone.SecondsSinceStart()) + (gone.ready ? ", while serving" : ", before it was ready") +
            "; restart " + std::to_string(restarts_[name]) + " for " + name +
            (backoff_ > 0 ? " in " + Seconds(backoff_) + " (it keeps dying at start)" : " now"));
    restart_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(backoff_));
    restarted_ = true;
    stop_status_ = 128 + WTERMSIG(status);  // a stop while waiting to restart exits so
  }

  // Constant after construction.
  const std::string binary_;
  char** const argv_;
  const SupervisedChild sockets_;  // the listening sockets every child inherits
  const sigset_t child_mask_;

  std::optional<ChildProcess> serving_, replacement_;
  std::vector<pid_t> retiring_;
  std::map<std::string, int64_t> restarts_;
  int64_t reloads_ = 0;  // SIGHUP replacements that took over serving
  double backoff_ = 0;
  std::optional<Clock::time_point> restart_at_;
  bool restarted_ = false;
  bool stopping_ = false;
  int stop_status_ = 0;
  std::optional<int> exit_status_;
};

}  // namespace

int RunSupervisor(const std::string& serving_binary, char** argv, const LaunchOptions& options) {
  // The sockets, opened once for every child: connections made while a child
  // restarts wait in their accept queues.
  std::vector<ListeningSockets> held;
  SupervisedChild sockets;
  auto listen = [&](const std::string& what, const std::string& host, int port, std::vector<int>* fds) {
    auto bound = ListeningSockets::Listen(host, port, what);
    if (!bound.ok()) {
      Log(LogLevel::kError, bound.status().message());
      return false;
    }
    // HTTP and metrics accept on one socket (the first address of a name):
    // another one, never accepted on, would hold its clients forever.
    if (what != "gRPC") bound->KeepFirstOnly();
    *fds = bound->fds();
    held.push_back(std::move(*bound));
    return true;
  };
  if (!listen("gRPC", options.grpc_address, options.grpc_port, &sockets.grpc_fds)) return 1;
  if (options.http && !listen("HTTP", options.http_address, options.http_port, &sockets.http_fds)) return 1;
  if (options.metrics &&
      !listen("metrics", options.metrics_address, options.metrics_port, &sockets.metrics_fds)) {
    return 1;
  }
  // Signals arrive through a signalfd, polled beside the children's ready pipes.
  sigset_t handled, original;
  sigemptyset(&handled);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP}) sigaddset(&handled, s);
  sigprocmask(SIG_BLOCK, &handled, &original);
  const int signals = signalfd(-1, &handled, SFD_CLOEXEC);
  if (signals < 0) {
    Log(LogLevel::kError, "supervisor: cannot open a signalfd");
    return 1;
  }
  return Supervisor(serving_binary, argv, std::move(sockets), original).Run(signals);
}

}  // namespace manypy
