#include "server/startup_stop.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "server/log.h"

namespace manypy {
namespace {

std::mutex mu;
bool armed = false;               // guarded by mu: a stop signal ends the process at once
std::thread* watching = nullptr;  // guarded by mu: the watcher to join

}  // namespace

StartupStop::StartupStop() {
  std::lock_guard<std::mutex> lock(mu);
  armed = true;
  watcher_ = std::thread([] {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    const timespec tick{0, 100 * 1000 * 1000};
    for (;;) {
      const int signal_number = sigtimedwait(&stop, nullptr, &tick);
      std::lock_guard<std::mutex> lock(mu);
      if (signal_number > 0 && armed) {
        // The interpreters and models half started hold nothing a client waits
        // for, and the caches they write are renamed into place whole.
        Log(LogLevel::kInfo, std::string(strsignal(signal_number)) +
                                 " during start-up: stopping before serving anything; exiting");
        fflush(nullptr);
        _exit(0);
      }
      // Taken just as the watch ended: pending again, for main's sigwait.
      if (signal_number > 0) kill(getpid(), signal_number);
      if (!armed) return;
    }
  });
  watching = &watcher_;
}

void StartupStop::EndBeforeServing() {
  std::thread* watcher = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    armed = false;
    std::swap(watcher, watching);
  }
  if (watcher != nullptr && watcher->joinable()) watcher->join();
}

StartupStop::~StartupStop() { EndBeforeServing(); }

}  // namespace manypy
