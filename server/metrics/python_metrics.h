// PythonMetrics: the metrics a model's Python declares (manypy.metrics.counter
// / gauge / histogram) as Prometheus families on the server's /metrics, each
// sample labelled with the model and version that made it. Declarations are
// checked (names, label names, one kind and one label set per name: a
// redeclaration the same way, as every interpreter's import of the model
// makes, is the same family); label values are bounded per family as the
// server's own are (LabelLimiter: past the limit, "other"). Registers the
// host services "metrics.declare" and "metrics.update" while it lives.
// Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/value.h"
#include "server/metrics/label_limiter.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace manypy {

class PythonMetrics {
 public:
  /// Distinct label-value sets a family keeps before the rest become "other".
  static constexpr size_t kMaxLabelSets = 64;

  /// `registry` (the metrics server's) must outlive it; null: a registry of
  /// its own that nothing exports (a server without metrics).
  explicit PythonMetrics(prometheus::Registry* registry);
  ~PythonMetrics();
  PythonMetrics(const PythonMetrics&) = delete;
  PythonMetrics& operator=(const PythonMetrics&) = delete;

  /// {name, help, kind ("counter", "gauge", "histogram"), labels [names],
  /// buckets [floats] (histograms)}: INVALID_ARGUMENT naming what is wrong.
  Status Declare(const Value& request);
  /// {name, op ("inc", "dec", "set", "observe"), value, labels [values],
  /// model, version}.
  Status Update(const Value& request);

 private:
  struct Family;
  std::shared_ptr<prometheus::Registry> own_registry_;  // when given none
  prometheus::Registry* const registry_;
  Mutex mu_;
  std::map<std::string, std::unique_ptr<Family>> families_ GUARDED_BY(mu_);
};

}  // namespace manypy
