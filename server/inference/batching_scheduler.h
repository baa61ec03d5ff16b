// BatchingScheduler: dynamic batching. Requests whose inputs have the same
// shape apart from the batch dimension are run as one execution of up to
// max_batch_size rows. Not thread-safe: the Dispatcher calls it under its lock.
#pragma once

#include "package_format/manifest.h"
#include "server/inference/scheduler.h"

namespace manypy {

/// A batch starts when, for the oldest queued request and those compatible
/// with it (in arrival order, while their rows fit in max_batch_size):
///   - the rows fill max_batch_size, or the next compatible request does not fit;
///   - or they reach a preferred batch size (the largest reachable one is taken);
///   - or the oldest has waited max_queue_delay;
///   - or no execution of this model is running: waiting could only add
///     latency, since nothing is about to free an interpreter for it (so at
///     concurrency 1 batching costs nothing). Under load, requests gather
///     while the model's executions run.
/// Incompatible (ragged) requests stay queued, in order, for a later batch.
class BatchingScheduler final : public Scheduler {
 public:
  BatchingScheduler(std::string model, size_t max_queue_size, int64_t max_batch_size,
                    BatchingSpec spec)
      : Scheduler(std::move(model), max_queue_size),
        max_batch_size_(max_batch_size),
        spec_(std::move(spec)) {}

  std::vector<RequestPtr> Next(size_t slot, Clock::time_point now, bool model_idle,
                               Clock::time_point* wake) override;

 private:
  const int64_t max_batch_size_;
  const BatchingSpec spec_;
};

}  // namespace manypy
