// InferenceStats: cumulative counters of one model version in the shape of
// the protocol's InferStatistics, and the registry that keeps them per
// (name, version) across reloads. Thread-safe (atomic counters; a mutex in
// the registry).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/mutex.h"

namespace manypy {

struct InferenceStats {
  std::atomic<uint64_t> inference_count{0};  // inferences (batch rows) run
  std::atomic<uint64_t> execution_count{0};  // model calls
  std::atomic<uint64_t> success_count{0}, success_ns{0};
  std::atomic<uint64_t> fail_count{0}, fail_ns{0};
  // Requests whose client left before the answer (not failures).
  std::atomic<uint64_t> cancel_count{0}, cancel_ns{0};
  std::atomic<uint64_t> queue_count{0}, queue_ns{0};
  std::atomic<uint64_t> compute_input_ns{0}, compute_infer_ns{0}, compute_output_ns{0};
  // Response cache lookups (Triton's cache_hit / cache_miss): a hit's time is
  // its key, lookup and copy out; a miss's its key, lookup and later insert.
  // A hit is also a success, but no queue, compute, inference or execution.
  std::atomic<uint64_t> cache_hit_count{0}, cache_hit_ns{0};
  std::atomic<uint64_t> cache_miss_count{0}, cache_miss_ns{0};
  std::atomic<uint64_t> last_inference_ms{0};  // since the epoch
};

/// One InferenceStats per model version for the life of the process: a
/// version loaded again continues its counts (as Triton's statistics do).
class InferenceStatsRegistry {
 public:
  std::shared_ptr<InferenceStats> For(const std::string& name, int64_t version) {
    MutexLock lock(mu_);
    auto& entry = stats_[{name, version}];
    if (entry == nullptr) entry = std::make_shared<InferenceStats>();
    return entry;
  }

 private:
  Mutex mu_;
  std::map<std::pair<std::string, int64_t>, std::shared_ptr<InferenceStats>> stats_ GUARDED_BY(mu_);
};

}  // namespace manypy
