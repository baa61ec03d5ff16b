// StartupStop: while the serving process starts (interpreters, models: seconds
// to minutes), a thread that ends it at once on SIGTERM or SIGINT, before it
// accepts a request, instead of after the start. Thread-safe.
#pragma once

#include <thread>

namespace manypy {

class StartupStop {
 public:
  /// Call with SIGTERM and SIGINT blocked in every thread (main's mask): the
  /// watcher takes them with sigtimedwait until EndBeforeServing. On one, it
  /// logs a line and exits the process with status 0: nothing was accepted,
  /// nothing is lost. One at a time.
  StartupStop();
  /// Ends the watch if EndBeforeServing has not (joins the watcher).
  ~StartupStop();
  StartupStop(const StartupStop&) = delete;
  StartupStop& operator=(const StartupStop&) = delete;

  /// From here a stop signal waits for main's sigwait (a drain): call before
  /// any port accepts a request. Returns within 100 ms; a no-op without a
  /// StartupStop or when called again.
  static void EndBeforeServing();

 private:
  std::thread watcher_;
};

}  // namespace manypy
