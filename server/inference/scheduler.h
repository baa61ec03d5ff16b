// Scheduler: one model version's bounded queue and how executions form from it
// (FifoScheduler: one request per call; BatchingScheduler: several;
// SequenceScheduler: one request of a stateful sequence on its interpreter).
// Not thread-safe: the Dispatcher calls every method under its lock.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/inference/inference_request.h"

namespace manypy {

using RequestPtr = std::unique_ptr<InferenceRequest>;

class Scheduler {
 public:
  /// `model` names the model in error messages.
  Scheduler(std::string model, size_t max_queue_size)
      : model_(std::move(model)), max_queue_size_(max_queue_size) {}
  virtual ~Scheduler() = default;

  /// Queues `*request` (moving from it). RESOURCE_EXHAUSTED naming the model
  /// and the limit when max_queue_size requests are queued already; then
  /// `*request` is left as it was (and so for any other refusal).
  virtual Status Enqueue(RequestPtr* request);

  /// The requests to run as one execution now on interpreter slot `slot`,
  /// or none if none should start yet; then `*wake` is lowered to when one
  /// might. `model_idle`: no execution of this model is running.
  virtual std::vector<RequestPtr> Next(size_t slot, Clock::time_point now, bool model_idle,
                                       Clock::time_point* wake) = 0;

  /// The execution that Next handed to `slot` has ended (its requests
  /// answered). Returns the keys of the sequence states to drop on `slot`
  /// (manypy.request.state of a sequence that ended). None by default.
  virtual std::vector<std::string> ExecutionEnded(size_t slot, Clock::time_point now) {
    (void)slot, (void)now;
    return {};
  }

  /// A sequence the scheduler ended by itself: idle past its limit.
  struct ClosedSequence {
    std::string key;    ///< as manypy.request.state knows it; also how messages name it
    bool bound = false;  ///< it ran on an interpreter: `slot` holds its state
    size_t slot = 0;
    std::chrono::microseconds idle{0};  ///< how long it had no request
  };
  /// Ends the sequences idle past their limit at `now` into `*closed`;
  /// lowers `*wake` to when the next one would be. Nothing by default.
  virtual void CloseIdle(Clock::time_point now, std::vector<ClosedSequence>* closed,
                         Clock::time_point* wake) {
    (void)now, (void)closed, (void)wake;
  }

  /// Whether Next hands some requests only to one slot: then every worker
  /// must be woken for new work, not just any one.
  virtual bool pins_slots() const { return false; }

  /// Moves out the requests whose deadline has passed or whose client gave
  /// up; lowers `*wake` to the earliest deadline still queued.
  void Expire(Clock::time_point now, std::vector<RequestPtr>* expired, Clock::time_point* wake);

  /// Moves out everything queued.
  std::vector<RequestPtr> TakeAll();
  /// Moves out `request` if it is still queued; else null.
  RequestPtr Take(const InferenceRequest* request);

  size_t queued() const { return queue_.size(); }
  size_t max_queue_size() const { return max_queue_size_; }

 protected:
  const std::string model_;
  const size_t max_queue_size_;
  std::deque<RequestPtr> queue_;  // oldest first
};

class FifoScheduler final : public Scheduler {
 public:
  using Scheduler::Scheduler;
  std::vector<RequestPtr> Next(size_t slot, Clock::time_point now, bool model_idle,
                               Clock::time_point* wake) override;
};

}  // namespace manypy
