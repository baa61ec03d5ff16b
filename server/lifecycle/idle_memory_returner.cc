#include "server/lifecycle/idle_memory_returner.h"

#include <algorithm>

#include "server/lifecycle/memory_release.h"

namespace manypy {

std::unique_ptr<IdleMemoryReturner> IdleMemoryReturner::Start(Options options) {
  std::unique_ptr<IdleMemoryReturner> returner(new IdleMemoryReturner(options));
  returner->thread_ = std::thread([r = returner.get()] { r->Run(); });
  return returner;
}

IdleMemoryReturner::~IdleMemoryReturner() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t IdleMemoryReturner::ToReturn(const std::deque<int64_t>& readings, size_t window_readings,
                                     int64_t keep_bytes) {
  if (readings.size() < window_readings || readings.empty()) return 0;
  const int64_t always_free = *std::min_element(readings.end() - window_readings, readings.end());
  return std::max<int64_t>(0, always_free - keep_bytes);
}

void IdleMemoryReturner::Forget(std::deque<int64_t>& readings, int64_t returned) {
  for (int64_t& reading : readings) reading = std::max<int64_t>(0, reading - returned);
}

void IdleMemoryReturner::Run() {
  const size_t window_readings =
      std::max<size_t>(1, static_cast<size_t>(options_.window / options_.interval));
  std::deque<int64_t> readings;
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, options_.interval, [this] { return stopping_; })) {
    readings.push_back(FreeBytesHeld());
    if (readings.size() > window_readings) readings.pop_front();
    const int64_t bytes = ToReturn(readings, window_readings, options_.keep_bytes);
    if (bytes > 0) {
      ReturnFreeBytes(bytes);
      Forget(readings, bytes);
    }
  }
}

}  // namespace manypy
