// Builds InferenceRequests for unit tests of the pipeline and records how
// each was answered. Thread-safe (the record is guarded by its own mutex).
#pragma once

#include <ATen/ATen.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "server/inference/inference_request.h"

namespace manypy::testing {

struct Answer {
  Status status;
  std::vector<Value> outputs;
  RequestTimes times;
};

/// Collects answers; Wait blocks until `n` requests have been answered.
class Answers {
 public:
  void Add(Answer a) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_.push_back(std::move(a));
    cv_.notify_all();
  }
  bool Wait(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return answers_.size() >= n; });
  }
  std::vector<Answer> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return answers_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Answer> answers_;
};

/// One FP32 input of shape [rows, width...] filled with `value`.
inline RequestPtr MakeRequest(std::shared_ptr<Answers> answers, float value, int64_t rows = 1,
                              std::vector<int64_t> item = {2}) {
  auto r = std::make_unique<InferenceRequest>();
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), item.begin(), item.end());
  r->inputs.emplace_back(at::full(shape, value));
  r->batch_rows = rows;
  r->item_shapes = {item};
  r->times.received = r->times.prepared = Clock::now();
  auto outputs = std::make_shared<std::vector<Value>>();
  r->encode = [outputs](std::vector<Value>& out) {
    *outputs = out;
    return Status::Ok();
  };
  InferenceRequest* raw = r.get();
  r->reply = [answers, outputs, raw](const Status& s) { answers->Add({s, *outputs, raw->times}); };
  return r;
}

}  // namespace manypy::testing
