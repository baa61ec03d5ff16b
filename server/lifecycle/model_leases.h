// Leases on loaded model versions: each request in flight holds one, from the
// lookup that hands out its model (Acquire) until it is destroyed after Finish,
// and returning one wakes whoever waits for a version to turn idle (the budget
// keeper). Thread-safe; LeaseEvents's mutex is taken under no other lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

#include "common/mutex.h"
#include "server/inference/inference_request.h"

namespace manypy {

/// Wakes waiters when a lease is returned or a version unloads. One per model manager.
class LeaseEvents {
 public:
  /// How many events have happened: pass it to WaitAfter to wait for the next.
  uint64_t seen() const { return events_.load(); }
  /// Waits until an event after `seen` or until `deadline`.
  void WaitAfter(uint64_t seen, Clock::time_point deadline);
  /// An event: wakes every waiter (costs a lock only while someone waits).
  void Notify();

 private:
  std::atomic<uint64_t> events_{0};
  std::atomic<int> waiting_{0};
  Mutex mu_;
  std::condition_variable cv_;
};

/// The leases out on one model version.
class VersionLeases : public std::enable_shared_from_this<VersionLeases> {
 public:
  explicit VersionLeases(std::shared_ptr<LeaseEvents> events) : events_(std::move(events)) {}
  /// A lease: it is returned when the last copy of what this returns goes.
  std::shared_ptr<void> Take();
  /// No lease is out.
  bool idle() const { return out_.load() == 0; }

 private:
  void Return();

  const std::shared_ptr<LeaseEvents> events_;
  std::atomic<int64_t> out_{0};
};

}  // namespace manypy
