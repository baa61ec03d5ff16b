// manypy-serving: the serving process. Reads its flags, starts a Server
// (server.h), serves until SIGTERM or SIGINT, then drains; on the supervisor's
// kStepAsideSignal (a SIGHUP restart) steps aside instead. Shutdown always
// ends: after the grace period stuck calls are abandoned and the process exits
// with status 1. Run by the launcher, manypy-server (supervisor/launcher_main.cc),
// as its child or in its place; a crash is reported (crash_handler.h).
#include <absl/synchronization/mutex.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include "server/crash/crash_handler.h"
#include "server/library_logging.h"
#include "server/log.h"
#include "server/server.h"
#include "server/server_options.h"
#include "server/startup_stop.h"
#include "server/supervisor/supervised_child.h"

int main(int argc, char** argv) {
  using namespace manypy;
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex's deadlock
  // detection on: every lock gRPC takes then updates a process-wide lock graph
  // (measured: 3-4% of the server's CPU on small requests). Off, as in release builds.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool help = false, version = false;
  auto options = ParseServerOptions(argc, argv, &help, &version);
  if (!options.ok()) {
    fprintf(stderr, "manypy-server: %s\n", options.status().message().c_str());
    return 2;
  }
  if (help) {
    fputs(ServerUsage().c_str(), stdout);
    return 0;
  }
  if (version) {
    printf("manypy-server %s (libtorch %s, Python %s)\n", MANYPY_VERSION, MANYPY_TORCH_VERSION,
           MANYPY_PYTHON_VERSION);
    return 0;
  }
  SetLogLevel(options->log_level);
  SetLogFormat(options->log_format);
  // Set by the launcher when it supervises this process (not with --no-supervisor).
  std::optional<SupervisedChild> supervised = TakeSupervisedChild();
  InitLibraryLogging(argv[0]);
  InstallCrashHandler({options->log_format == "json", options->crash_state_dir});
  // For the line a model's os._exit leaves, which the model runtime's Python
  // writes: the interpreters copy the environment when the pool starts.
  setenv("MANYPY_LOG_FORMAT", options->log_format.c_str(), 1);
  SetAccessLogFraction(options->access_log_fraction);
  // Every thread inherits this mask; only main receives the stop signals (sigwait).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, kStepAsideSignal);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = [&] {
    StartupStop stop_while_starting;  // SIGTERM before the ports accept: exit 0 at once
    return Server::Start(*options, supervised ? &*supervised : nullptr);
  }();
  if (!server.ok()) {
    if (server.status().code() == StatusCode::kInvalidArgument) {  // an option's file
      fprintf(stderr, "manypy-server: %s\n", server.status().message().c_str());
      return 2;
    }
    Log(LogLevel::kError, server.status().message());
    return 1;
  }
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  const auto grace = std::chrono::seconds(options->grace_period_seconds);
  const bool step_aside = signal_number == kStepAsideSignal;
  Log(LogLevel::kInfo, (step_aside ? std::string("SIGUSR2 (the supervisor's SIGHUP restart): a new "
                                                "serving process took over; accepting no more, "
                                                "finishing the calls in flight (grace period ")
                                   : std::string(strsignal(signal_number)) +
                                         ": draining in-flight requests (grace period ") +
                           std::to_string(grace.count()) + " s)");
  // A backstop: whatever hangs (a native call holding a GIL, gRPC), the process ends.
  std::thread([grace] {
    std::this_thread::sleep_for(grace + std::chrono::seconds(4));
    Log(LogLevel::kError, "shutdown did not finish within the grace period; exiting");
    _exit(1);
  }).detach();
  const size_t stuck = step_aside ? (*server)->StepAside(grace) : (*server)->Drain(grace);
  (*server)->Wait();
  if (stuck > 0) {
    Log(LogLevel::kError, std::to_string(stuck) +
                              " model call(s) still running after the grace period were "
                              "abandoned (their clients got UNAVAILABLE); exiting without unloading");
    fflush(nullptr);
    _exit(1);
  }
  Log(LogLevel::kInfo, "stopped");
  return 0;
}
