// PrometheusObserver: turns the pipeline's and the lifecycle's events
// (InferenceObserver) into prometheus-cpp counters, gauges and histograms in
// one Registry. Thread-safe: a shared lock finds a model's metrics, which are
// atomic; the exclusive lock is taken only the first time a version is seen.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "server/inference/inference_observer.h"
#include "server/metrics/label_limiter.h"

namespace manypy {

class PrometheusObserver final : public InferenceObserver {
 public:
  /// Registers every family in `registry` (which must outlive this) and the
  /// per-interpreter series of `interpreters` slots.
  PrometheusObserver(prometheus::Registry* registry, size_t interpreters);
  ~PrometheusObserver() override;

  void OnRequestFinished(const std::string& name, int64_t version, const std::string& id,
                         const Status& status, const RequestTimes& times,
                         int64_t batch_rows) override;
  void OnExecutionStarted(const std::string& name, int64_t version, size_t slot) override;
  void OnExecutionFinished(const std::string& name, int64_t version, size_t slot, int64_t rows,
                           Clock::time_point started, Clock::time_point ended,
                           const std::string& error_type) override;
  void OnModelLoaded(const std::string& name, int64_t version, double load_seconds,
                     double warmup_seconds) override;
  void OnModelLoadFailed(const std::string& name, int64_t version, const Status& status) override;
  void OnModelRetired(const std::string& name, int64_t version) override;
  void OnModelMemory(const std::string& name, int64_t version, int64_t weights_bytes,
                     int64_t python_bytes) override;
  void OnModelColdLoaded(const std::string& name, int64_t version, double seconds) override;
  void OnModelEvicted(const std::string& name, int64_t version, int64_t bytes) override;

  /// The outcome label of a final status: "success", "invalid_argument", ...
  static const char* Outcome(const Status& status);

 private:
  struct ModelMetrics;  // one model version's series
  ModelMetrics& For(const std::string& name, int64_t version);

  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Counter>& inferences_;
  prometheus::Family<prometheus::Counter>& executions_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& queue_duration_;
  prometheus::Family<prometheus::Histogram>& compute_duration_;
  prometheus::Family<prometheus::Histogram>& batch_size_;
  prometheus::Family<prometheus::Counter>& exceptions_;
  prometheus::Family<prometheus::Gauge>& ready_;
  prometheus::Family<prometheus::Gauge>& load_duration_;
  prometheus::Family<prometheus::Gauge>& warmup_duration_;
  prometheus::Family<prometheus::Counter>& load_failures_;
  prometheus::Family<prometheus::Gauge>& memory_;
  prometheus::Family<prometheus::Counter>& cold_loads_;
  prometheus::Family<prometheus::Counter>& evictions_;
  prometheus::Family<prometheus::Counter>& evicted_bytes_;
  prometheus::Family<prometheus::Counter>& cache_hits_;
  prometheus::Family<prometheus::Counter>& cache_misses_;
  prometheus::Family<prometheus::Counter>& cache_hit_seconds_;
  prometheus::Family<prometheus::Counter>& cache_miss_seconds_;
  std::vector<prometheus::Gauge*> slot_in_flight_;   // per interpreter; constant after construction
  std::vector<prometheus::Counter*> slot_busy_;      // per interpreter; constant after construction

  LabelLimiter unknown_models_{64};     // names of requests that reached no model
  LabelLimiter exception_types_{32};    // Python exception types

  SharedMutex mu_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<ModelMetrics>> models_ GUARDED_BY(mu_);
  std::map<std::pair<std::string, int64_t>, int> loads_ GUARDED_BY(mu_);  // live loads per version
};

}  // namespace manypy
