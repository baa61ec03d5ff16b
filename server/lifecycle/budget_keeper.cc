#include "server/lifecycle/budget_keeper.h"

#include <algorithm>
#include <filesystem>

#include "server/inference/inference_observer.h"
#include "server/log.h"

namespace manypy {
namespace {

// How long a load waits for evicted or replaced versions still draining (a
// request that slipped in before the eviction) to free their memory before
// the budget refuses it.
constexpr auto kDrainWait = std::chrono::seconds(5);
// How long it waits for a busy model to turn idle. A client's next request,
// for another model, may come before the lease of its last one is returned
// (its frontend still holds the handle): without this wait, sequential
// requests alternating between two models under --max-loaded-models=1 were
// refused now and then.
constexpr auto kBusyWait = std::chrono::seconds(1);

}  // namespace

int64_t BudgetKeeper::EstimateBytes(const RepositoryEntry& entry) const {
  std::error_code ec;
  int64_t archive = static_cast<int64_t>(std::filesystem::file_size(entry.path, ec));
  if (ec) archive = 0;
  return archive + registry_->SlotBytesSeen(entry.name);
}

int64_t BudgetKeeper::ResidentBytes() const {
  MutexLock lock(registry_->mu());
  int64_t total = 0;
  for (const auto& r : registry_->ResidentLocked("")) total += r.bytes;
  return total;
}

Status BudgetKeeper::EvictLocked(const ResidentModel& victim, const std::string& for_model,
                                 BackgroundThread& unloader) {
  VersionPtr serving = registry_->ServingLocked(victim.name);
  if (serving == nullptr) return Status::Ok();
  Log(LogLevel::kInfo, "model " + victim.name + " version " + std::to_string(victim.version) +
                           " evicted (least recently used, idle) to make room for " + for_model +
                           ": frees " + FormatBytes(victim.bytes));
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelEvicted(victim.name, victim.version, victim.bytes);
  }
  // Idle: drains at once, then unloads.
  return retirer_->RetireLocked(serving,
                         "evicted (least recently used) to make room for '" + for_model +
                             "'; loads on first request",
                         unloader);
}

void BudgetKeeper::FitAfterLoad(const std::string& name, BackgroundThread& unloader) {
  if (limits_.memory_bytes == 0 || ResidentBytes() <= limits_.memory_bytes) return;
  Status fitted = MakeRoom(name, 0, unloader, /*adds_model=*/false);
  if (!fitted.ok()) {
    Log(LogLevel::kWarning, "model " + name + " measured more at load than its estimate and the "
                            "total passes the budget: " + fitted.message());
  }
}

Status BudgetKeeper::ReserveMeasured(const Executable& executable, const std::string& name,
                                     BackgroundThread& unloader) {
  MemoryFootprint measured = executable.Memory();
  if (!limits_.enabled() || measured.per_slot_bytes.empty()) return Status::Ok();
  int64_t first = measured.per_slot_bytes[0];
  return MakeRoom(name, measured.shared_bytes + first * static_cast<int64_t>(slots_), unloader);
}

Status BudgetKeeper::MakeRoom(const std::string& name, int64_t needed, BackgroundThread& unloader,
                              bool adds_model) {
  if (!limits_.enabled()) return Status::Ok();
  const Clock::time_point start = Clock::now();
  for (;;) {
    // Read before looking: an event from here on ends the wait below.
    const uint64_t seen = events_->seen();
    EvictionPlan plan;
    bool draining = false, busy = false;
    {
      MutexLock lock(registry_->mu());
      std::vector<ResidentModel> resident = registry_->ResidentLocked(name);
      plan = PlanLoad(limits_, resident, name, needed, may_evict_, adds_model);
      for (const auto& r : resident) {
        draining = draining || (!r.evictable && r.name != name);
        busy = busy || (r.evictable && !r.pinned && !r.idle);
      }
      if (plan.refusal.ok()) {
        for (const auto& victim : plan.victims) {
          MANYPY_RETURN_IF_ERROR(EvictLocked(victim, name, unloader));
        }
      }
    }
    if (plan.refusal.ok() && plan.victims.empty()) return Status::Ok();
    Clock::time_point wait_until = start;
    if (!plan.refusal.ok()) {
      // Memory is coming back (a version drains) or may (a busy model turns idle).
      if (draining) wait_until = std::max(wait_until, start + kDrainWait);
      if (may_evict_ && busy) wait_until = std::max(wait_until, start + kBusyWait);
      if (Clock::now() >= wait_until) return plan.refusal;
    }
    // The evicted versions drained at once (idle) and their unloads are
    // queued on the unloader: once it has run them their memory is back.
    unloader.Run([] {});
    // Else a lease returned or an unload finished wakes this; then it plans again.
    if (!plan.refusal.ok()) events_->WaitAfter(seen, wait_until);
  }
}

}  // namespace manypy
