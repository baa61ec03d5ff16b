#include "server/serve_until_signal.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "server/log.h"
#include "server/supervisor/supervised_child.h"

namespace manypy {
namespace {

sigset_t StopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, kStepAsideSignal);
  return stop_signals;
}

}  // namespace

void BlockStopSignals() {
  const sigset_t stop_signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
}

int ServeUntilSignal(Server& server, std::chrono::seconds grace) {
  const sigset_t stop_signals = StopSignals();
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
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
  const size_t stuck = step_aside ? server.StepAside(grace) : server.Drain(grace);
  server.Wait();
  if (stuck > 0) {
    Log(LogLevel::kError,
        std::to_string(stuck) +
            " model call(s) still running after the grace period were "
            "abandoned (their clients got UNAVAILABLE); exiting without unloading");
    fflush(nullptr);
    _exit(1);
  }
  Log(LogLevel::kInfo, "stopped");
  return 0;
}

}  // namespace manypy
