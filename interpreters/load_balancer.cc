#include "interpreters/load_balancer.h"

#include <functional>
#include <limits>
#include <thread>

namespace manypy {

LoadBalancer::LoadBalancer(size_t size) : size_(size), counters_(new Counter[size]) {}

size_t LoadBalancer::Acquire() {
  static thread_local const size_t start = std::hash<std::thread::id>()(std::this_thread::get_id());
  for (size_t k = 0; k < size_; ++k) {
    size_t i = (start + k) % size_;
    int64_t idle = 0;
    if (counters_[i].sessions.load(std::memory_order_relaxed) == 0 &&
        counters_[i].sessions.compare_exchange_strong(idle, 1, std::memory_order_acquire)) {
      return i;
    }
  }
  size_t best = start % size_;
  int64_t best_load = std::numeric_limits<int64_t>::max();
  for (size_t k = 0; k < size_; ++k) {
    size_t i = (start + k) % size_;
    int64_t load = counters_[i].sessions.load(std::memory_order_relaxed);
    if (load < best_load) best = i, best_load = load;
  }
  counters_[best].sessions.fetch_add(1, std::memory_order_acquire);
  return best;
}

void LoadBalancer::AcquireAt(size_t index) {
  counters_[index].sessions.fetch_add(1, std::memory_order_acquire);
}

void LoadBalancer::Release(size_t index) {
  counters_[index].sessions.fetch_sub(1, std::memory_order_release);
}

int64_t LoadBalancer::InUse(size_t index) const {
  return counters_[index].sessions.load(std::memory_order_relaxed);
}

}  // namespace manypy
