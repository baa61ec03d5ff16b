// CompileMetrics: recompilations of torch.compile'd models while they serve
// (PyTorch 2.x): manypy_model_recompiles_total{model,version} on /metrics,
// and one log line per model version and reason. The model runtime reports
// each through the host service "compile.recompiled" while this lives.
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/value.h"

namespace prometheus {
class Registry;
template <typename T>
class Family;
class Counter;
}  // namespace prometheus

namespace manypy {

class CompileMetrics {
 public:
  /// `registry` (the metrics server's) must outlive it; null: one of its own
  /// that nothing exports (a server without metrics).
  explicit CompileMetrics(prometheus::Registry* registry);
  ~CompileMetrics();
  CompileMetrics(const CompileMetrics&) = delete;
  CompileMetrics& operator=(const CompileMetrics&) = delete;

  /// {model, version, reason}: counts one recompilation; logs it the first
  /// time this model version recompiles for this reason.
  Status Recompiled(const Value& request);

 private:
  std::shared_ptr<prometheus::Registry> own_registry_;  // when given none
  prometheus::Family<prometheus::Counter>* const recompiles_;
  Mutex mu_;
  std::set<std::string> logged_ GUARDED_BY(mu_);  // "model\x1fversion\x1freason"
};

}  // namespace manypy
