// FakeExecutable: a Python-free Executable for unit tests: returns its inputs
// times `factor`; a call whose first element is `hang_value` spins until
// interrupted or released. Thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "server/inference/executable.h"

namespace manypy::testing {

class FakeExecutable final : public Executable {
 public:
  explicit FakeExecutable(double factor = 2.0, std::chrono::microseconds delay = {})
      : factor_(factor), delay_(delay) {}

  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook* hook) override {
    calls_++;
    int now = ++running_;
    int seen = max_running_.load();
    while (now > seen && !max_running_.compare_exchange_weak(seen, now)) {
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      slots_.push_back(slot);
      rows_.push_back(inputs.empty() ? 0 : inputs[0].to_tensor().size(0));
    }
    std::atomic<bool> interrupted{false};
    hook->Arm([&interrupted] { interrupted = true; });
    bool hang = !inputs.empty() && inputs[0].to_tensor().numel() > 0 &&
                inputs[0].to_tensor().flatten()[0].item<double>() == hang_value;
    auto until = std::chrono::steady_clock::now() + delay_;
    while ((hang && !release_) || std::chrono::steady_clock::now() < until) {
      if (interrupted && !ignore_interrupts_) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    hook->Disarm();
    --running_;
    if (interrupted && !ignore_interrupts_) return Internal("ExecutionInterrupted");
    if (hang && release_) return Internal("released");
    std::vector<Value> out;
    for (const auto& v : inputs) out.emplace_back(v.to_tensor() * factor_);
    return out;
  }

  bool interruptible() const override { return !ignore_interrupts_; }

  static constexpr double hang_value = -7;
  std::atomic<int> calls_{0}, running_{0}, max_running_{0};
  std::atomic<bool> release_{false};
  std::atomic<bool> ignore_interrupts_{false};
  std::mutex mu_;
  std::vector<size_t> slots_;  // guarded by mu_
  std::vector<int64_t> rows_;  // guarded by mu_: rows of each call

 private:
  const double factor_;
  const std::chrono::microseconds delay_;
};

}  // namespace manypy::testing
