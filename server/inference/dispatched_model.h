// DispatchedModel: one loaded model version as the Dispatcher sees it: its
// scheduler, how to run it, its limits and its statistics. The scheduler and
// the dispatch state are guarded by the Dispatcher's lock; the rest is constant.
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
  /// Stateful sequences (`enabled`): their idle timeout and concurrency limit.
  SequenceBatchingSpec sequences;
};

class DispatchedModel {
 public:
  /// `stats`: where its requests are counted (shared with earlier loads of
  /// the same version); null: counters of its own.
  DispatchedModel(Manifest manifest, ModelLimits limits, std::unique_ptr<Scheduler> scheduler,
             std::shared_ptr<Executable> executable,
             std::shared_ptr<InferenceStats> stats = nullptr)
      : manifest_(std::move(manifest)),
        limits_(limits),
        executable_(std::move(executable)),
        stats_(stats != nullptr ? std::move(stats) : std::make_shared<InferenceStats>()),
        scheduler_(std::move(scheduler)) {}

  const Manifest& manifest() const { return manifest_; }
  const ModelLimits& limits() const { return limits_; }
  const SequenceBatchingSpec& sequences() const { return limits_.sequences; }
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
  /// How long its calls take lately (Dispatcher::NoteExecutionTime); max
  /// until one has run.
  Clock::duration recent_execution_ = Clock::duration::max();
  std::function<void()> on_drained_;  // called once, as it leaves
};

}  // namespace manypy
