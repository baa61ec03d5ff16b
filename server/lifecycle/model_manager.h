// ModelManager: the lifecycle's facade. Loads model versions (at start, on
// request, or on a model's first inference), swaps them without failing
// requests, evicts idle ones under a memory budget, unloads, and hands out
// short-lived ref-counted handles. Thread-safe. Lock order: load_mu_, the
// registry's mutex, then the Dispatcher's; no GIL under the registry's.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/pool.h"
#include "server/inference/dispatcher.h"
#include "server/lifecycle/background_thread.h"
#include "server/lifecycle/budget_keeper.h"
#include "server/lifecycle/load_pipeline.h"
#include "server/lifecycle/load_waiters.h"
#include "server/lifecycle/memory_budget.h"
#include "server/lifecycle/model.h"
#include "server/lifecycle/model_name.h"
#include "server/lifecycle/model_registry.h"
#include "server/lifecycle/model_repository.h"
#include "server/lifecycle/model_status.h"
#include "server/lifecycle/quarantine.h"
#include "server/lifecycle/version_retirer.h"

namespace manypy {

class ModelManager {
 public:
  struct Options {
    std::string repository;
    bool explicit_control = false;            ///< false: load every model at start
    /// Load a repository model on its first inference request (implies
    /// loading only `startup_models` at start, which are then pinned: never
    /// evicted); idle models are evicted under `budget`.
    bool on_demand = false;
    std::vector<std::string> startup_models;  ///< loaded at start in explicit and on-demand modes
    /// Memory budget and cap on loaded models (memory_budget.h). A load that
    /// would pass it evicts idle, unpinned models least recently used first
    /// in on-demand mode; is refused (RESOURCE_EXHAUSTED) in the other modes.
    BudgetLimits budget;
    ServingDefaults serving;                  ///< queue, execution and warm-up settings
    ArchiveLimits archive_limits;             ///< archives over them are refused at load
    /// The server's response cache (--response-cache-bytes), for the models
    /// whose settings ask for it; null: none. Must outlive the manager.
    ResponseCache* response_cache = nullptr;
    /// Turns one archive into what the dispatcher runs and fills `manifest`
    /// (validated). Called on the loading thread, never under the manager's
    /// locks. Empty: PythonModel::Load into the pool. Tests inject fakes here.
    using Loader = LoadContext::Loader;
    Loader loader = nullptr;
    /// Models that crashed the server: refused at every load but an explicit
    /// one (Load), which lifts their quarantine. Null: none. Must outlive the manager.
    Quarantine* quarantine = nullptr;
    /// Interpreter slots (bound of instance_count, warm-up slots) when there
    /// is no pool; with a pool, its size is used and this is ignored.
    size_t interpreters = 1;
  };

  /// Loads the startup models. A model that fails to load is reported in the
  /// index, not as a Create failure; a missing repository is NOT_FOUND.
  /// `pool` may be null only with `options.loader` set (INVALID_ARGUMENT
  /// otherwise). `pool` and `dispatcher` must outlive the manager.
  static StatusOr<std::unique_ptr<ModelManager>> Create(InterpreterPool* pool,
                                                       Dispatcher* dispatcher, Options options);
  /// Create without loading: a missing repository is NOT_FOUND, as there;
  /// then LoadStartupModels once (the server first registers what a model's
  /// Python may call while it loads).
  static StatusOr<std::unique_ptr<ModelManager>> Open(InterpreterPool* pool,
                                                     Dispatcher* dispatcher, Options options);
  /// Loads the startup models, all at once per model (no frontend serves yet).
  void LoadStartupModels();
  /// Runs the changes asked for and the unloads of versions that have
  /// drained; one that is still running (stuck in native code) is left to
  /// the process's exit.
  ~ModelManager();

  /// (Re)loads the newest version of `name` found in the repository, lifting
  /// its quarantine (an operator asked for it).
  /// INVALID_ARGUMENT for a name that is not a model name (a path, say).
  Status Load(const std::string& name);
  /// Stops serving `name`; in-flight requests finish on their handles.
  Status Unload(const std::string& name);
  /// Load and Unload off the caller's thread: on the manager's own repository
  /// thread, one change at a time in the order asked, at background priority.
  /// `done` is called once with the result, from that thread.
  void LoadAsync(const std::string& name, std::function<void(const Status&)> done);
  void UnloadAsync(const std::string& name, std::function<void(const Status&)> done);

  /// The serving version, or `version` if given ("" or "-1" = serving one).
  /// NOT_FOUND for an unknown model or version, UNAVAILABLE if not ready.
  StatusOr<std::shared_ptr<Model>> Get(const std::string& name, const std::string& version) const;
  /// Get for an inference request. In on-demand mode it also marks the model
  /// used (for least-recently-used eviction), and a repository model that
  /// does not serve is loaded first: one load however many requests ask (the
  /// first starts it), each waiting until `deadline` or until `cancelled()`.
  /// `done` is called once: from this thread when no load is needed, else from
  /// the loading thread (or the waiters' watchdog at a deadline). A load that
  /// fails answers every waiter UNAVAILABLE with its reason (a budget refusal:
  /// RESOURCE_EXHAUSTED).
  using Acquired = std::function<void(StatusOr<std::shared_ptr<Model>>)>;
  void Acquire(const std::string& name, const std::string& version, Clock::time_point deadline,
               std::function<bool()> cancelled, Acquired done);
  /// Whether Acquire loads `name`, which Get did not find (`looked_up`): in
  /// on-demand mode, a repository model that serves no version.
  bool LoadsOnRequest(const std::string& name, const Status& looked_up) const;
  /// The manifest and settings of `name`: the serving version's, or in
  /// on-demand mode those of the newest archive, read without loading it.
  StatusOr<ModelDescription> Describe(const std::string& name, const std::string& version) const;
  /// Every model of the repository and every model known to the manager.
  std::vector<ModelStatus> Index() const;
  /// Handles of every ready model (for statistics).
  std::vector<std::shared_ptr<Model>> ReadyModels() const;
  const ModelRepository& repository() const { return repository_; }
  const BudgetLimits& budget() const { return options_.budget; }
  /// Bytes held by every loaded, loading or draining version (what the budget counts).
  int64_t ResidentBytes() const { return budget_.ResidentBytes(); }

 private:
  ModelManager(size_t slots, Dispatcher* dispatcher, Options options);
  /// Loads `name` through `pipeline`, one load or unload at a time.
  Status LoadWith(LoadPipeline& pipeline, const std::string& name);
  /// The on-demand load Acquire starts, on demand_: counts and logs a cold
  /// load; a load of a model that serves by then does nothing.
  Status LoadOnDemand(const std::string& name);

  const size_t slots_;  // interpreters a model may run on
  Dispatcher* const dispatcher_;
  const Options options_;  // its loader is always set
  const ModelRepository repository_;

  InferenceStatsRegistry stats_;  // per version, across reloads (thread-safe)
  Mutex load_mu_;                 // one load or unload at a time
  std::atomic<bool> stopping_{false};  // set first by the destructor
  std::atomic<uint64_t> use_clock_{0};  // orders inference lookups, for LRU
  // Lease returns and unloads, which the budget keeper waits for (requests
  // take leases only under a budget).
  const std::shared_ptr<LeaseEvents> events_ = std::make_shared<LeaseEvents>();
  ModelRegistry registry_;
  VersionRetirer retirer_;
  BudgetKeeper budget_;
  const LoadContext context_;
  // Where each kind of load runs: at start every slot at once, inline; asked
  // for (Load, LoadAsync), slot by slot at background priority on loader_;
  // on demand (a request waits), slot by slot at normal priority, inline on
  // demand_, evictions unloaded on demand_unloads_.
  LoadPipeline startup_;
  LoadPipeline requested_;
  LoadPipeline on_demand_;
  // Loads once serving (and their failure's cleanup) and unloads drained
  // versions, at background priority, off every request thread.
  BackgroundThread loader_{"manypy-loader"};
  // Unloads the versions that on-demand loads evict, at normal priority: a
  // request waits for the memory they free (run at nice +10 on a busy
  // machine, they and the loads behind them took most of a cold start).
  BackgroundThread demand_unloads_{"manypy-evict", 0};
  // Requests waiting for on-demand loads; destroyed after changes_ (declared
  // before it), so a load that ends at shutdown still finds it.
  LoadWaiters waiters_;
  // Runs LoadAsync and UnloadAsync (each then uses loader_ for the heavy
  // part, so it cannot be loader_ itself). Emptied and joined first at
  // destruction.
  std::unique_ptr<BackgroundThread> changes_ = std::make_unique<BackgroundThread>("manypy-changes");
  // Runs on-demand loads (Acquire), one at a time, at normal priority, their
  // slots' preparation inline. Emptied and joined beside changes_.
  std::unique_ptr<BackgroundThread> demand_ = std::make_unique<BackgroundThread>("manypy-demand", 0);
};

}  // namespace manypy
