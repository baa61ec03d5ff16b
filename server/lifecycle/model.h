// Model: a short-lived, ref-counted handle on one loaded model version: its
// manifest and settings, where it came from, its statistics, and Infer, the
// way into its scheduler. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "server/inference/dispatcher.h"
#include "server/lifecycle/model_settings.h"

namespace manypy {

struct LoadTimes {
  double load_seconds = 0;    ///< opening, validating and loading into every interpreter
  double warmup_seconds = 0;  ///< warm-up runs on every instance
};

class Model {
 public:
  Model(std::string path, ModelSettings settings, LoadTimes times, MemoryFootprint memory,
        std::shared_ptr<DispatchedModel> queue, Dispatcher* dispatcher)
      : path_(std::move(path)),
        settings_(std::move(settings)),
        times_(times),
        memory_(std::move(memory)),
        queue_(std::move(queue)),
        dispatcher_(dispatcher) {}

  const Manifest& manifest() const { return queue_->manifest(); }
  const std::string& name() const { return manifest().name; }
  int64_t version() const { return manifest().version; }
  const std::string& path() const { return path_; }
  const ModelSettings& settings() const { return settings_; }
  const LoadTimes& load_times() const { return times_; }
  /// What this version holds, measured when it loaded (executable.h).
  const MemoryFootprint& memory() const { return memory_; }
  InferenceStats& stats() const { return queue_->stats(); }
  size_t queued() const { return dispatcher_->queued(*queue_); }

  /// Schedule -> Execute -> Finish for a prepared request: it is answered
  /// through its own callbacks, from a worker thread, or at once (from this
  /// thread) when it cannot be queued; returns null. If this version was
  /// unloaded (and drained) since the handle was taken, the request comes
  /// back unanswered: look the model up again.
  [[nodiscard]] RequestPtr Infer(RequestPtr request, bool wake_worker = true) const {
    return dispatcher_->Submit(queue_, std::move(request), wake_worker);
  }
  /// Answers a request that failed Prepare, counting it as failed.
  void Reject(RequestPtr request, const Status& status) const {
    FinishRequest(*queue_, std::move(request), status, {}, 0);
  }
  /// Answers a prepared request with `outputs` the server knows without
  /// running the model (an empty batch, empty_batch.h), counting it as a
  /// success with no execution.
  void Answer(RequestPtr request, std::vector<Value> outputs) const {
    FinishRequest(*queue_, std::move(request), Status::Ok(), std::move(outputs), 0);
  }

  const std::shared_ptr<DispatchedModel>& queue() const { return queue_; }

 private:
  const std::string path_;
  const ModelSettings settings_;
  const LoadTimes times_;
  const MemoryFootprint memory_;
  const std::shared_ptr<DispatchedModel> queue_;
  Dispatcher* const dispatcher_;
};

}  // namespace manypy
