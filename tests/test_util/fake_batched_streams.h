// FakeBatchedStreams: a Python-free streaming model that batches continuously
// (Executable's start/step), for the running batch's unit tests. A request's
// input [count, fail_at] asks for `count` responses 0, 1, ... (each a
// one-element tensor); fail_at >= 0 makes the step that would send response
// fail_at fail that request alone; fail_at == -2: that step raises for all
// (no request named). Constructed with `prefill_time`, it also prefills
// apart (Executable::PrefillBatchedStream: response 0 and a portable state
// [count, fail_at, sent], taking that long; AdoptBatchedStream), where
// fail_at == -3 fails the prefill and fail_at == -4 the adoption. Thread-safe.
#pragma once

#include <ATen/ATen.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "server/inference/executable.h"

namespace manypy::testing {

class FakeBatchedStreams final : public Executable {
 public:
  FakeBatchedStreams(size_t size, std::chrono::microseconds step_time,
                     std::optional<std::chrono::microseconds> prefill_time = std::nullopt)
      : size_(size), step_time_(step_time), prefill_time_(prefill_time) {}

  size_t continuous_batching() const override { return size_; }
  bool prefills_apart() const override { return prefill_time_.has_value(); }

  StatusOr<Prefilled> PrefillBatchedStream(size_t slot, const std::vector<Value>& inputs,
                                           InterruptHook* hook, std::string* error_type) override {
    if (!Wait(*prefill_time_, hook)) return Internal("ExecutionInterrupted");
    const at::Tensor& in = inputs[0].to_tensor();
    int64_t count = in[0].item<int64_t>(), fail_at = in[1].item<int64_t>();
    std::lock_guard<std::mutex> lock(mu_);
    prefill_slots_.push_back(slot);
    if (fail_at == -3) {
      *error_type = "ValueError";
      return Internal("model 'fake' raised ValueError: its prefill failed");
    }
    Prefilled out;
    out.first.responded = true;
    out.first.outputs.emplace_back(at::full({1}, 0.0f));
    out.first.finished = count <= 1;
    if (!out.first.finished) out.state = Value(at::tensor({count, fail_at, int64_t{1}}));
    return out;
  }

  Status AdoptBatchedStream(size_t slot, uint64_t key, const Value& state, InterruptHook*,
                            std::string* error_type) override {
    const at::Tensor& t = state.to_tensor();
    std::lock_guard<std::mutex> lock(mu_);
    if (t[1].item<int64_t>() == -4) {
      *error_type = "ValueError";
      return Internal("model 'fake' raised ValueError: its adoption failed");
    }
    states_[{slot, key}] = {t[0].item<int64_t>(), t[1].item<int64_t>(), t[2].item<int64_t>()};
    adoptions_++;
    return Status::Ok();
  }

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
    if (!Wait(step_time_, hook)) return Internal("ExecutionInterrupted");
    std::lock_guard<std::mutex> lock(mu_);
    step_sizes_.push_back(keys.size());
    step_slots_.push_back(slot);
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
  std::vector<size_t> step_slots() {
    std::lock_guard<std::mutex> lock(mu_);
    return step_slots_;
  }
  std::vector<size_t> prefill_slots() {
    std::lock_guard<std::mutex> lock(mu_);
    return prefill_slots_;
  }
  size_t adoptions() {
    std::lock_guard<std::mutex> lock(mu_);
    return adoptions_;
  }

 private:
  // Takes `time`, or less when the hook fires; false then.
  static bool Wait(std::chrono::microseconds time, InterruptHook* hook) {
    std::atomic<bool> interrupted{false};
    hook->Arm([&interrupted] { interrupted = true; });
    auto until = std::chrono::steady_clock::now() + time;
    while (std::chrono::steady_clock::now() < until && !interrupted) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    hook->Disarm();
    return !interrupted;
  }

  struct State {
    int64_t count, fail_at, sent;
  };
  const size_t size_;
  const std::chrono::microseconds step_time_;
  const std::optional<std::chrono::microseconds> prefill_time_;
  std::mutex mu_;
  std::map<std::pair<size_t, uint64_t>, State> states_;  // guarded by mu_
  std::vector<size_t> step_sizes_;                       // guarded by mu_
  std::vector<size_t> step_slots_;                       // guarded by mu_
  std::vector<size_t> prefill_slots_;                    // guarded by mu_
  size_t adoptions_ = 0;                                 // guarded by mu_
};

}  // namespace manypy::testing
