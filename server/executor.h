// Executor: a fixed set of worker threads running submitted tasks in FIFO
// order. The gRPC threads only enqueue; the workers do the Python work.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace manypy {

class Executor {
 public:
  explicit Executor(size_t threads);
  /// Runs every task already submitted, then joins the workers.
  ~Executor();

  /// Queues `task`; returns false (and drops it) after shutdown began.
  bool Submit(std::function<void()> task);

 private:
  void Work();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace manypy
