// ModelQueue: one loaded model version as the Dispatcher sees it: its
// scheduler, how to run it, its limits and its statistics. The scheduler and
// the counters are guarded by the Dispatcher's lock; the rest is constant.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "package_format/manifest.h"
#include "server/inference/executable.h"
#include "server/inference/inference_stats.h"
#include "server/inference/scheduler.h"

namespace manypy {

struct ModelLimits {
  /// Interpreters that may run this model at the same time (>= 1).
  size_t instance_count = 1;
  /// A call running longer is interrupted; zero: no limit.
  std::chrono::microseconds max_execution{std::chrono::seconds(60)};
};

class ModelQueue {
 public:
  /// `stats`: where its requests are counted (shared with earlier loads of
  /// the same version); null: counters of its own.
  ModelQueue(Manifest manifest, ModelLimits limits, std::unique_ptr<Scheduler> scheduler,
             std::shared_ptr<Executable> executable,
             std::shared_ptr<InferenceStats> stats = nullptr)
      : manifest_(std::move(manifest)),
        limits_(limits),
        executable_(std::move(executable)),
        stats_(stats != nullptr ? std::move(stats) : std::make_shared<InferenceStats>()),
        scheduler_(std::move(scheduler)) {}

  const Manifest& manifest() const { return manifest_; }
  const ModelLimits& limits() const { return limits_; }
  Executable& executable() const { return *executable_; }
  InferenceStats& stats() const { return *stats_; }

 private:
  friend class Dispatcher;
  const Manifest manifest_;
  const ModelLimits limits_;
  const std::shared_ptr<Executable> executable_;
  const std::shared_ptr<InferenceStats> stats_;

  // Guarded by the Dispatcher's mu_.
  std::unique_ptr<Scheduler> scheduler_;
  size_t running_ = 0;    // executions in progress
  bool retired_ = false;  // takes no new requests; leaves once drained
  bool left_ = false;     // retired and drained: no longer dispatched
  std::function<void()> on_drained_;  // called once, as it leaves
};

/// The Finish stage, the one place where requests end: encodes the outputs
/// (when `status` is OK) through the request's frontend, counts the request
/// once (statistics, observer, access log) by its outcome, then replies.
/// Every request ends here exactly once, whatever its outcome: answered,
/// refused, expired, cancelled or abandoned at shutdown.
void FinishRequest(const ModelQueue& model, RequestPtr request, Status status,
                   std::vector<Value> outputs, int64_t batch_rows);

/// Answers a request that reached no loaded model (unknown model or version,
/// model not ready) with `status`, reporting it to the observer as a request
/// for `name`.
void FinishUnrouted(const std::string& name, RequestPtr request, const Status& status);

/// Answers `request` with the error `status` while a worker may still run it
/// (the server gives up at shutdown): as FinishRequest, but the request stays
/// with its execution, and only the frontend's side (reply) and its finish
/// time are touched.
void FinishAbandoned(const ModelQueue& model, InferenceRequest& request, const Status& status);

/// Records one execution of `rows` batch rows on interpreter `slot`, run from
/// `started` to `ended`; `error_type` names the model's exception, if any.
void RecordExecution(const ModelQueue& model, size_t slot, int64_t rows, Clock::time_point started,
                     Clock::time_point ended, const std::string& error_type);

}  // namespace manypy
