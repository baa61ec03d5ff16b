// ModelManager: loads, warms up and registers model versions (at start, on
// request, or on a model's first inference), swaps them without failing
// requests, evicts idle ones under a memory budget, unloads, and hands out
// short-lived ref-counted handles.
// Thread-safe. Lock order: load_mu_, mu_, then the Dispatcher's; no GIL under mu_.
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

#include "common/status.h"
#include "interpreters/pool.h"
#include "server/inference/dispatcher.h"
#include "server/lifecycle/background_thread.h"
#include "server/lifecycle/load_waiters.h"
#include "server/lifecycle/memory_budget.h"
#include "server/lifecycle/model.h"
#include "server/lifecycle/model_name.h"
#include "server/lifecycle/model_repository.h"
#include "server/lifecycle/version_lifecycle.h"

namespace manypy {

/// A model version's row in the repository index, in the protocol's words
/// (Triton's states). Each version moves through VersionLifecycle; the row
/// shows it as LOADING (Loading), READY (Ready), UNLOADING (Draining or
/// Unloading after a newer version replaced it) or UNAVAILABLE with a reason
/// (failed, unloaded, or in the repository and not loaded).
enum class ModelState { kLoading, kReady, kUnloading, kUnavailable };
const char* ModelStateName(ModelState state);

struct ModelStatus {
  ModelStatus() = default;
  ModelStatus(std::string name, int64_t version, ModelState state, std::string reason)
      : name(std::move(name)), version(version), state(state), reason(std::move(reason)) {}

  std::string name;
  int64_t version = 0;  ///< serving (or last attempted) version; 0 if none
  ModelState state = ModelState::kUnavailable;
  std::string reason;
  /// In the repository, and no load of it was asked for (not a failure).
  bool not_loaded = false;
  /// A READY version's memory, measured at load.
  MemoryFootprint memory;
};

/// What metadata and config are made of: a loaded version's manifest and
/// settings, or (on-demand mode) those of the archive that would load.
struct ModelDescription {
  Manifest manifest;
  ModelSettings settings;
};

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
    using Loader = std::function<StatusOr<std::shared_ptr<Executable>>(
        const std::string& archive_path, Manifest* manifest)>;
    Loader loader = nullptr;
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
  /// Runs the changes asked for and the unloads of versions that have
  /// drained; one that is still running (stuck in native code) is left to
  /// the process's exit.
  ~ModelManager();

  /// (Re)loads the newest version of `name` found in the repository.
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
  int64_t ResidentBytes() const;

 private:
  ModelManager(size_t slots, Dispatcher* dispatcher, Options options)
      : slots_(slots),
        dispatcher_(dispatcher),
        options_(std::move(options)),
        repository_(options_.repository, options_.archive_limits) {
    drain_guard_->manager = this;
  }

  // One loaded (or loading) version: its lifecycle and, from Ready until it
  // is unloaded, its handle.
  struct LoadedVersion {
    LoadedVersion(const std::string& name, int64_t version) : lifecycle(name, version) {}
    VersionLifecycle lifecycle;
    std::shared_ptr<Model> model;  // guarded by mu_
    int64_t bytes = 0;             // guarded by mu_: measured at load; until unloaded
  };
  using VersionPtr = std::shared_ptr<LoadedVersion>;

  // One model, by name. Guarded by mu_.
  struct ModelEntry {
    VersionPtr serving;  ///< Ready: takes new requests
    VersionPtr loading;  ///< Loading, while a load runs (another may serve meanwhile)
    ModelStatus shown;   ///< its row while nothing serves: unloaded, failed, or gone
    ModelStatus failed;  ///< the last version that failed to load while another served
    bool pinned = false;      ///< loaded at start (--load-model): never evicted
    uint64_t last_used = 0;   ///< use_clock_ at its last inference lookup
  };

  // Lets the dispatcher's drained callbacks reach the manager only while it
  // lives (the dispatcher outlives it): the destructor clears `manager`.
  struct DrainGuard {
    std::mutex mu;
    ModelManager* manager = nullptr;  // guarded by mu
  };

  enum class LoadCause { kRequested, kOnDemand };
  /// Load; an on-demand load of a model that serves by then does nothing.
  Status LoadModel(const std::string& name, LoadCause cause);
  /// The on-demand load Acquire starts, on demand_: counts and logs a cold load.
  Status LoadOnDemand(const std::string& name);
  /// Where a load's heavy work (preparing slots, unloading what it evicts)
  /// runs: for a load a request waits for (on-demand), at normal priority:
  /// inline on demand_ and on demand_unloads_; for a load asked for, at
  /// background priority on loader_.
  void RunLoadWork(LoadCause cause, const std::function<void()>& work);
  BackgroundThread& UnloaderFor(LoadCause cause) {
    return cause == LoadCause::kOnDemand ? demand_unloads_ : loader_;
  }
  /// What a load of `entry` is expected to need: its archive's size plus what
  /// the model's Python measured at its last load (0 before its first).
  int64_t EstimateBytes(const RepositoryEntry& entry) const;
  /// Evicts idle models (on-demand mode) until `needed` more bytes fit the
  /// budget beside what is resident, waiting for their unloads; `name`'s own
  /// versions are never evicted for it. RESOURCE_EXHAUSTED when they cannot fit.
  Status MakeRoom(const std::string& name, int64_t needed, LoadCause cause, bool adds_model = true);
  /// After `name` loaded and measured more than its estimate: evicts idle
  /// models until the total is within the budget again (a warning if it cannot).
  void FitAfterLoad(const std::string& name, LoadCause cause);
  /// Every loaded, loading and draining version, as the budget sees them. REQUIRES: mu_.
  std::vector<ResidentModel> Resident(const std::string& loading) const;
  /// Stops serving `victim` to make room for `for_model`, unloading it on
  /// `unloader`. REQUIRES: mu_.
  void Evict(const ResidentModel& victim, const std::string& for_model, BackgroundThread& unloader);
  /// Loads, warms up and registers one archive.
  StatusOr<std::shared_ptr<Model>> LoadVersion(const RepositoryEntry& entry, LoadCause cause);
  /// Prepares and warms up `executable` on every interpreter slot, each held
  /// out of dispatch meanwhile (once past start: one at a time, through
  /// RunLoadWork); adds the time taken to `times`.
  Status PrepareEverySlot(Executable& executable, const Manifest& manifest, int64_t warmup_runs,
                          LoadCause cause, LoadTimes* times);
  /// Between a load's first interpreter's Prepare and its warm-up (which
  /// reads the weights): room in the budget for what that interpreter
  /// measured, in every interpreter. Before a model's first load its estimate
  /// is its archive alone; its Python (a table built at import) would
  /// otherwise pass the budget in every interpreter until FitAfterLoad evicted.
  Status ReserveMeasured(const Executable& executable, const std::string& name, LoadCause cause);
  /// Releases `executable` on every slot in turn, each held out of dispatch.
  void ReleaseEverySlot(Executable& executable);
  /// Ready -> Draining: stops dispatching new requests to `version`; once the
  /// dispatcher says it has drained, it is unloaded on `unloader` (loader_ but
  /// for what an on-demand load evicts). REQUIRES: mu_.
  void Retire(const VersionPtr& version, BackgroundThread& unloader);
  /// Draining -> Unloading -> Unloaded, slot by slot, on its unloader.
  void UnloadDrained(const VersionPtr& version);

  const size_t slots_;  // interpreters a model may run on
  Dispatcher* const dispatcher_;
  const Options options_;  // its loader is always set
  const ModelRepository repository_;

  InferenceStatsRegistry stats_;  // per version, across reloads (thread-safe)
  std::mutex load_mu_;  // one load or unload at a time
  // True while Create loads the startup models (no frontend serves yet).
  std::atomic<bool> starting_{true};
  std::atomic<bool> stopping_{false};  // set first by the destructor
  mutable std::mutex mu_;
  std::map<std::string, ModelEntry> models_;  // guarded by mu_
  std::vector<VersionPtr> retiring_;          // guarded by mu_: Draining or Unloading
  std::atomic<uint64_t> use_clock_{0};        // orders inference lookups, for LRU
  // Guarded by mu_: per model name, what its Python measured at its last load
  // (the estimate of its next load).
  std::map<std::string, int64_t> slot_bytes_seen_;
  // Guarded by mu_: names with a valid archive at the last scan (start, Index),
  // so that a model that is there but not loaded is told so.
  mutable std::set<std::string> repository_names_;
  const std::shared_ptr<DrainGuard> drain_guard_ = std::make_shared<DrainGuard>();
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
