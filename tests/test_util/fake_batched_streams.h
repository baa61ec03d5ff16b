// FakeBatchedStreams: a Python-free streaming model that batches continuously
// (Executable's start/step), for the running batch's unit tests. A request's
// input [count, fail_at] asks for `count` responses 0, 1, ... (each a
// one-element tensor); fail_at >= 0 makes the step that would send response
// fail_at fail that request alone; fail_at == -2: that step raises for all
// (no request named). Thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "server/inference/executable.h"

namespace manypy::testing {

class FakeBatchedStreams final : public Executable {
 public:
  FakeBatchedStreams(size_t size, std::chrono::microseconds step_time)
      : size_(size), step_time_(step_time) {}

  size_t continuous_batching() const override { return size_; }

  StatusOr<std::vector<Value>> Run(size_t, const std::vector<Value>&, InterruptHook*) override {
    return Internal("a streaming model is not run as a call");
  }

  Status StartBatchedStream(size_t slot, uint64_t key, const std::vector<Value>& inputs,
                            InterruptHook*, std::string*) override {
    const at::Tensor& in = inputs[0].to_tensor();
    std::lock_guard<std::mutex> lock(mu_);
    states_[{slot, key}] = {in[0].item<int64_t>(), in[1].item<int64_t>(), 0};
    return Status::Ok();
  }

  StatusOr<std::vector<StreamStep>> StepBatchedStreams(size_t slot, const std::vector<uint64_t>& keys,
                                                       InterruptHook* hook, std::string* error_type) override {
    std::atomic<bool> interrupted{false};
    hook->Arm([&interrupted] { interrupted = true; });
    auto until = std::chrono::steady_clock::now() + step_time_;
    while (std::chrono::steady_clock::now() < until && !interrupted) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    hook->Disarm();
    if (interrupted) return Internal("ExecutionInterrupted");
    std::lock_guard<std::mutex> lock(mu_);
    step_sizes_.push_back(keys.size());
    std::vector<StreamStep> steps;
    for (uint64_t key : keys) {
      State& s = states_.at({slot, key});
      if (s.fail_at == -2 && s.sent == 1) {
        *error_type = "RuntimeError";
        return Internal("model 'fake' raised RuntimeError: the step failed");
      }
      StreamStep step;
      if (s.sent == s.fail_at) {
        step.error = Internal("model 'fake' raised ValueError: state " + std::to_string(key));
      } else {
        step.responded = true;
        step.outputs.emplace_back(at::full({1}, static_cast<float>(s.sent)));
        step.finished = ++s.sent >= s.count;
      }
      steps.push_back(std::move(step));
    }
    return steps;
  }

  void EndBatchedStreams(size_t slot, const std::vector<uint64_t>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t key : keys) states_.erase({slot, key});
  }

  std::vector<size_t> step_sizes() {
    std::lock_guard<std::mutex> lock(mu_);
    return step_sizes_;
  }
  size_t live_states() {
    std::lock_guard<std::mutex> lock(mu_);
    return states_.size();
  }

 private:
  struct State {
    int64_t count, fail_at, sent;
  };
  const size_t size_;
  const std::chrono::microseconds step_time_;
  std::mutex mu_;
  std::map<std::pair<size_t, uint64_t>, State> states_;  // guarded by mu_
  std::vector<size_t> step_sizes_;                       // guarded by mu_
};

}  // namespace manypy::testing
