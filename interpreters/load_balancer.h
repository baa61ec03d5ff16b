// LoadBalancer: picks an idle interpreter, else the least busy one, with no
// pool-wide lock. Thread-safe and lock-free; one cache line per counter.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace manypy {

class LoadBalancer {
 public:
  explicit LoadBalancer(size_t size);

  /// Marks and returns an interpreter: an idle one when there is one (each
  /// thread starts its search at its own offset, so threads do not convoy on
  /// interpreter 0 and tend to reuse the same interpreter), else the least busy.
  size_t Acquire();
  /// Marks interpreter `index` as used by one more session.
  void AcquireAt(size_t index);
  void Release(size_t index);
  int64_t InUse(size_t index) const;
  size_t size() const { return size_; }

 private:
  // Each counter on its own cache line: no false sharing between interpreters.
  struct alignas(64) Counter {
    std::atomic<int64_t> sessions{0};
  };
  const size_t size_;
  std::unique_ptr<Counter[]> counters_;
};

}  // namespace manypy
