// MemoryBudget: the least-recently-used eviction policy under a memory budget
// and a cap on loaded models, as data: given what is loaded and what a load
// needs, which idle models to unload, or why the load cannot fit. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

/// One loaded (or loading, or draining) model version as the policy sees it.
struct ResidentModel {
  std::string name;
  int64_t version = 0;
  int64_t bytes = 0;        ///< its measured memory (MemoryFootprint::total)
  uint64_t last_used = 0;   ///< a sequence number: larger is more recent
  bool pinned = false;      ///< --load-model: never evicted
  bool idle = false;        ///< nothing queued or running, no handle held
  bool evictable = true;    ///< false while it loads or drains (already going)
};

struct BudgetLimits {
  int64_t memory_bytes = 0;  ///< 0: no memory budget
  size_t max_models = 0;     ///< 0: no cap on loaded models
  bool enabled() const { return memory_bytes > 0 || max_models > 0; }
};

/// What a load needs to happen: evict `victims` (least recently used first),
/// then it fits. `refusal` is set (RESOURCE_EXHAUSTED) when it cannot fit
/// even after evicting every idle, unpinned model.
struct EvictionPlan {
  std::vector<ResidentModel> victims;
  Status refusal;
};

/// The plan for loading `name` needing `needed_bytes` beside `resident` (which
/// does not include it; `adds_model` false: it does, already loaded, and the
/// plan only brings the total back within the budget). `may_evict` false
/// (explicit mode: an evicted model would not come back by itself) refuses
/// instead of evicting.
EvictionPlan PlanLoad(const BudgetLimits& limits, const std::vector<ResidentModel>& resident,
                      const std::string& name, int64_t needed_bytes, bool may_evict,
                      bool adds_model = true);

/// "1.5 GiB", "8.0 MiB", "512 B".
std::string FormatBytes(int64_t bytes);

/// Parses a size: a number with an optional unit (K, M, G, T, as powers of
/// 1024, with or without "i" and "B"; "B" or none: bytes), e.g. "2G", "512MiB".
StatusOr<int64_t> ParseBytes(const std::string& text);

}  // namespace manypy
