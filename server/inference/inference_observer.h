// InferenceObserver: what the pipeline and the model lifecycle report (for
// metrics and access logs). Set once at startup; implementations must be
// thread-safe and quick: they are called on request and worker threads.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "server/inference/inference_request.h"

namespace manypy {

class InferenceObserver {
 public:
  virtual ~InferenceObserver() = default;
  /// A request to model `name` version `version` was answered with `status`.
  /// `version` is 0 when the request reached no loaded model (unknown model
  /// or version, model not ready); then only `times.received` is set.
  /// `batch_rows`: rows of the execution it ran in (0: it did not run).
  virtual void OnRequestFinished(const std::string& name, int64_t version, const std::string& id,
                                 const Status& status, const RequestTimes& times,
                                 int64_t batch_rows) = 0;
  /// A model call began / ended on interpreter `slot`. `error_type` names the
  /// Python exception the model raised ("" when none).
  virtual void OnExecutionStarted(const std::string& name, int64_t version, size_t slot) = 0;
  virtual void OnExecutionFinished(const std::string& name, int64_t version, size_t slot,
                                   int64_t rows, Clock::time_point started,
                                   Clock::time_point ended, const std::string& error_type) = 0;
  /// Model lifecycle (from the model manager's threads).
  virtual void OnModelLoaded(const std::string& name, int64_t version, double load_seconds,
                             double warmup_seconds) = 0;
  virtual void OnModelLoadFailed(const std::string& name, int64_t version,
                                 const Status& status) = 0;
  /// The version stopped serving (replaced or unloaded).
  virtual void OnModelRetired(const std::string& name, int64_t version) = 0;
  /// What the version holds, measured at its load: `weights_bytes` once for the
  /// process (its archive's mapped copy), `python_bytes` summed over interpreters.
  virtual void OnModelMemory(const std::string& name, int64_t version, int64_t weights_bytes,
                             int64_t python_bytes) {
    (void)name, (void)version, (void)weights_bytes, (void)python_bytes;
  }
  /// On-demand mode: a request's lookup loaded the model (a cold start) in `seconds`.
  virtual void OnModelColdLoaded(const std::string& name, int64_t version, double seconds) {
    (void)name, (void)version, (void)seconds;
  }
  /// The memory budget evicted the (idle) version to make room, freeing `bytes`.
  virtual void OnModelEvicted(const std::string& name, int64_t version, int64_t bytes) {
    (void)name, (void)version, (void)bytes;
  }
};

/// Installs the observer (null: none). Call before any request or load, and
/// set it back to null only when nothing runs any more.
void SetInferenceObserver(InferenceObserver* observer);
/// The observer, or null.
InferenceObserver* GetInferenceObserver();

}  // namespace manypy
