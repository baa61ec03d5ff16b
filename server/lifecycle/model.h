// Model: a short-lived, ref-counted handle on one loaded model version: its
// manifest and settings, where it came from, its statistics, and Infer, the
// way into its scheduler. Thread-safe.
#pragma once

#include <memory>
#include <string>

#include "server/inference/dispatcher.h"
#include "server/inference/response_cache.h"
#include "server/lifecycle/model_leases.h"
#include "server/lifecycle/model_settings.h"

namespace manypy {

struct LoadTimes {
  double load_seconds = 0;    ///< opening, validating and loading into every interpreter
  double warmup_seconds = 0;  ///< warm-up runs on every instance
};

class Model {
 public:
  /// `cache`: the server's response cache when this version uses it, else
  /// null; it must outlive the model.
  /// `leases`: counts this version's requests in flight (each Infer takes one),
  /// or null when nothing needs to know (no memory budget).
  Model(std::string path, ModelSettings settings, LoadTimes times, MemoryFootprint memory,
        std::shared_ptr<DispatchedModel> queue, Dispatcher* dispatcher,
        ResponseCache* cache = nullptr, std::shared_ptr<VersionLeases> leases = nullptr)
      : path_(std::move(path)),
        settings_(std::move(settings)),
        times_(times),
        memory_(std::move(memory)),
        queue_(std::move(queue)),
        dispatcher_(dispatcher),
        cache_(cache),
        cache_owner_(cache != nullptr ? cache->NewOwner() : 0),
        leases_(std::move(leases)) {}

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
    if (leases_ != nullptr) request->lease = leases_->Take();
    return dispatcher_->Submit(queue_, std::move(request), wake_worker);
  }
  /// Infer, run on this thread when an interpreter is idle and nothing waits
  /// (Dispatcher::SubmitOrRunHere: then it is answered before this returns).
  /// Only from a thread that runs no model call: a frontend's.
  [[nodiscard]] RequestPtr InferHereIfIdle(RequestPtr request) const {
    if (leases_ != nullptr) request->lease = leases_->Take();
    return dispatcher_->SubmitOrRunHere(queue_, std::move(request));
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

  /// The response cache this version answers from and fills, or null (its
  /// settings do not ask for one, or the server has none).
  ResponseCache* response_cache() const { return cache_; }
  /// This load's owner id in the cache: a reload of the same version is another.
  uint64_t cache_owner() const { return cache_owner_; }
  /// This version's leases (null without a memory budget).
  const std::shared_ptr<VersionLeases>& leases() const { return leases_; }
  /// Drops this load's cache entries (it stops serving).
  void DropCachedResponses() const {
    if (cache_ != nullptr) cache_->DropOwner(cache_owner_);
  }

 private:
  const std::string path_;
  const ModelSettings settings_;
  const LoadTimes times_;
  const MemoryFootprint memory_;
  const std::shared_ptr<DispatchedModel> queue_;
  Dispatcher* const dispatcher_;
  ResponseCache* const cache_;
  const uint64_t cache_owner_;
  const std::shared_ptr<VersionLeases> leases_;
};

}  // namespace manypy
