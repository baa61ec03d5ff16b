// Gate: test code's calls wait here until the test opens it or lets them
// through one by one; every wait ends after 20 s at most, so a failing test
// cannot hang (a dispatcher's shutdown, a load). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace manypy::testing {

class Gate {
 public:
  /// Open (calls pass) unless `open` is false.
  explicit Gate(bool open = true) : open_(open) {}

  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  /// Lets `n` more calls through a closed gate.
  void Permit(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    permits_ += n;
    cv_.notify_all();
  }
  void Pass() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(20), [this] { return open_ || permits_ > 0; });
    if (!open_ && permits_ > 0) --permits_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_;        // guarded by mu_
  int permits_ = 0;  // guarded by mu_
};

}  // namespace manypy::testing
