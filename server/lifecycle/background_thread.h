// BackgroundThread: one long-lived thread at a lower CPU priority that runs
// the tasks handed to it one at a time, each caller waiting for its own.
//
// The model manager loads, warms up and unloads models on it once the server
// serves. A load is a fraction of a second to seconds of CPU (unpickling,
// imports, warm-up calls); at normal priority it takes a core from the
// requests of every other model, which on a 2-core machine shows up in their
// p99 (make soak). And one long-lived thread enters each interpreter once: an
// interpreter keeps a thread state for every thread that ever entered it, so
// loads on short-lived request threads would leave one behind each time.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "common/mutex.h"

namespace manypy {

/// How much nicer than the process background work runs: nice +10 gives it
/// about a tenth of a core that requests want too, and all of an idle one.
constexpr int kBackgroundNiceIncrement = 10;

/// Lowers the calling thread's CPU priority by `increment` nice steps (Linux
/// per-thread nice; capped at 19). Cannot be undone without privileges, so
/// only for threads that stay in the background. False if the kernel refused.
bool LowerThisThreadsPriority(int increment);

class BackgroundThread {
 public:
  /// `name` names the thread (NameThisThread).
  explicit BackgroundThread(const char* name, int nice_increment = kBackgroundNiceIncrement);
  /// Runs the tasks still queued, then joins.
  ~BackgroundThread();
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;

  /// Runs `task` on the background thread and returns once it has run.
  /// Not from a task itself (that would wait for itself).
  void Run(std::function<void()> task);
  /// Queues `task` to run on the background thread after those queued before
  /// it, and returns at once. What it throws is lost: it must not throw.
  void Post(std::function<void()> task);

 private:
  void Loop(const char* name, int nice_increment);

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<void()>> tasks_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;                             // last: starts after the rest exist
};

}  // namespace manypy
