// LoadWaiters: the requests waiting for an on-demand load of their model, by
// name. The first waiter of a name starts the load (single flight); each waits
// within its own deadline or until its client leaves; the load's end answers
// the rest. Thread-safe (one mutex; callbacks run without it); one watchdog thread.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "server/inference/inference_request.h"

namespace manypy {

class LoadWaiters {
 public:
  /// Called once: OK when the load finished (look the model up again), the
  /// load's failure, DEADLINE_EXCEEDED at the waiter's deadline, CANCELLED
  /// when its client left, UNAVAILABLE at shutdown.
  using Done = std::function<void(const Status&)>;
  struct Waiter {
    Clock::time_point deadline = Clock::time_point::max();
    std::function<bool()> cancelled;  ///< optional: true once the client left
    Done done;
  };

  LoadWaiters();
  /// Answers whoever still waits UNAVAILABLE and joins the watchdog.
  ~LoadWaiters();
  LoadWaiters(const LoadWaiters&) = delete;
  LoadWaiters& operator=(const LoadWaiters&) = delete;

  /// Queues `waiter` for the load of `name`. True when no load of `name` was
  /// in flight: the caller starts it and calls Finish when it ends.
  bool Add(const std::string& name, Waiter waiter);
  /// The load of `name` ended with `status`: every waiter still there is
  /// answered with it, on this thread, and the next Add starts a new load.
  void Finish(const std::string& name, const Status& status);
  /// Whether a load of `name` is in flight (requests wait for it).
  bool Loading(const std::string& name) const;

 private:
  struct Flight {
    Clock::time_point started;
    std::vector<Waiter> waiters;
  };
  void Watch();

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Flight> flights_ GUARDED_BY(mu_);  // one per load in flight
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread watchdog_;                   // last: starts once the rest exist
};

}  // namespace manypy
