// ConnectionLimiter: bounds the HTTP connections open at once. A connection holds
// a slot (an RAII handle) for its whole life. Thread-safe (one atomic counter).
#pragma once

#include <atomic>
#include <memory>

namespace manypy {

class ConnectionLimiter {
 public:
  explicit ConnectionLimiter(int max_connections)
      : max_(max_connections), open_(std::make_shared<std::atomic<int>>(0)) {}

  /// A slot released when the last copy is destroyed; null when `max_connections`
  /// slots are held already.
  std::shared_ptr<void> TryAcquire() {
    int open = open_->load();
    do {
      if (open >= max_) return nullptr;
    } while (!open_->compare_exchange_weak(open, open + 1));
    // The counter outlives the limiter while a connection still holds a slot.
    return std::shared_ptr<void>(static_cast<void*>(open_.get()), [open = open_](void*) { --*open; });
  }

  int open() const { return open_->load(); }
  int max() const { return max_; }

 private:
  const int max_;
  const std::shared_ptr<std::atomic<int>> open_;
};

}  // namespace manypy
