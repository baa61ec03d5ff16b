// LoadPipeline: brings a model's newest archive into service: makes room in
// the budget, loads, prepares and warms up every interpreter slot, registers
// the scheduler with the dispatcher, then retires the version it replaces.
// Where its heavy work runs is given once, as its LoadExecutor. Thread-safe
// for one Load at a time (the manager's load lock); takes the registry's mutex.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "server/inference/dispatcher.h"
#include "server/inference/response_cache.h"
#include "server/lifecycle/background_thread.h"
#include "server/lifecycle/budget_keeper.h"
#include "server/lifecycle/model_registry.h"
#include "server/lifecycle/model_repository.h"
#include "server/lifecycle/version_retirer.h"

namespace manypy {

/// Where a load's work runs.
struct LoadExecutor {
  /// Each slot's preparation and warm-up, and a failed load's release:
  /// inline on the loading thread (null), or run on this thread.
  BackgroundThread* slot_work = nullptr;
  /// Where the versions evicted to make room unload.
  BackgroundThread* evictions = nullptr;
  /// Every slot at once (at start, before any frontend serves: faster), else
  /// one at a time while the others answer.
  bool every_slot_at_once = false;
  /// A request waits for the load: marks the model used once it serves.
  bool for_request = false;
};

/// What every pipeline of a manager shares; each pointer must outlive it.
class Quarantine;

struct LoadContext {
  using Loader = std::function<StatusOr<std::shared_ptr<Executable>>(const std::string& archive_path,
                                                                     Manifest* manifest)>;
  Loader loader;
  const ModelRepository* repository = nullptr;
  ModelRegistry* registry = nullptr;
  BudgetKeeper* budget = nullptr;
  VersionRetirer* retirer = nullptr;
  Dispatcher* dispatcher = nullptr;
  InferenceStatsRegistry* stats = nullptr;
  ResponseCache* response_cache = nullptr;  ///< null: the server has none
  ServingDefaults serving;
  size_t slots = 1;
  /// Where replaced versions unload (the manager's background thread).
  BackgroundThread* replaced = nullptr;
  /// Hands out the order of use (for least-recently-used eviction).
  std::function<uint64_t()> next_use;
  /// Counts each loaded version's requests in flight, under a budget; else null.
  std::shared_ptr<LeaseEvents> lease_events;
  /// Models refused for crashing the server (quarantine.h); null: none refused.
  const Quarantine* quarantine = nullptr;
};

class LoadPipeline {
 public:
  LoadPipeline(const LoadContext* context, LoadExecutor executor)
      : context_(*context), executor_(executor) {}

  /// Loads the newest version of `name` in the repository; the version that
  /// served keeps serving meanwhile, and drains once the new one is ready (or
  /// serves on when it fails). A name the repository lacks is NOT_FOUND.
  Status Load(const std::string& name);

 private:
  /// Loads, warms up and registers one archive.
  StatusOr<std::shared_ptr<Model>> LoadVersion(const RepositoryEntry& entry);
  /// Prepares and warms up `executable` on every slot, each held out of
  /// dispatch meanwhile; adds the time taken to `times`.
  Status PrepareEverySlot(Executable& executable, const Manifest& manifest, int64_t warmup_runs,
                          LoadTimes* times);
  Status PrepareSlotBySlot(Executable& executable, const Manifest& manifest, int64_t warmup_runs,
                           LoadTimes* times);
  void RunSlotWork(const std::function<void()>& work);

  const LoadContext& context_;
  const LoadExecutor executor_;
};

}  // namespace manypy
