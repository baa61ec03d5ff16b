// BudgetKeeper: keeps the loaded models within the memory budget and the cap
// on loaded models: makes room for a load by evicting idle models (least
// recently used first), waiting for lease returns and unloads as events, never
// by polling. Thread-safe; takes the registry's mutex, never under it.
#pragma once

#include <memory>
#include <string>

#include "server/lifecycle/background_thread.h"
#include "server/lifecycle/memory_budget.h"
#include "server/lifecycle/model_leases.h"
#include "server/lifecycle/model_registry.h"
#include "server/lifecycle/version_retirer.h"

namespace manypy {

class BudgetKeeper {
 public:
  /// `may_evict` (on-demand mode: an evicted model loads again on its next
  /// request): else a load that does not fit is refused. Every pointer must
  /// outlive the keeper.
  BudgetKeeper(BudgetLimits limits, bool may_evict, size_t slots, ModelRegistry* registry,
               VersionRetirer* retirer, std::shared_ptr<LeaseEvents> events)
      : limits_(limits), may_evict_(may_evict), slots_(slots), registry_(registry),
        retirer_(retirer), events_(std::move(events)) {}

  const BudgetLimits& limits() const { return limits_; }
  /// What a load of `entry` is expected to need: its archive's size plus what
  /// the model's Python measured at its last load (0 before its first).
  int64_t EstimateBytes(const RepositoryEntry& entry) const;
  /// Bytes held by every loaded, loading or draining version.
  int64_t ResidentBytes() const;
  /// Evicts idle models until `needed` more bytes fit beside what is resident,
  /// unloading them on `unloader` and waiting for that; `name`'s own versions
  /// are never evicted for it. Waits a moment for versions still draining, and
  /// for busy models to turn idle; then RESOURCE_EXHAUSTED when it cannot fit.
  /// `adds_model` false: `name` is loaded already (only the total must fit).
  Status MakeRoom(const std::string& name, int64_t needed, BackgroundThread& unloader,
                  bool adds_model = true);
  /// After `name` loaded and measured more than its estimate: evicts idle
  /// models until the total is within the budget again (a warning if it cannot).
  void FitAfterLoad(const std::string& name, BackgroundThread& unloader);
  /// Between a load's first interpreter's Prepare and its warm-up (which
  /// reads the weights): room for what that interpreter measured, in every
  /// interpreter. Before a model's first load its estimate is its archive
  /// alone; its Python (a table built at import) would otherwise pass the
  /// budget in every interpreter until FitAfterLoad evicted.
  Status ReserveMeasured(const Executable& executable, const std::string& name,
                         BackgroundThread& unloader);

 private:
  /// Stops serving `victim` to make room for `for_model`.
  Status EvictLocked(const ResidentModel& victim, const std::string& for_model,
                     BackgroundThread& unloader) REQUIRES(registry_->mu());

  const BudgetLimits limits_;
  const bool may_evict_;
  const size_t slots_;
  ModelRegistry* const registry_;
  VersionRetirer* const retirer_;
  const std::shared_ptr<LeaseEvents> events_;
};

}  // namespace manypy
