// ModelRegistry: every model the manager knows by name, its versions and
// their lifecycles: the one source of state; the index, the serving handles
// and the budget's view are derived from it. Thread-safe: one mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "server/lifecycle/memory_budget.h"
#include "server/lifecycle/model.h"
#include "server/lifecycle/model_leases.h"
#include "server/lifecycle/model_repository.h"
#include "server/lifecycle/model_status.h"
#include "server/lifecycle/version_lifecycle.h"

namespace manypy {

/// One version of a model from the start of its load until it is forgotten.
struct LoadedVersion {
  LoadedVersion(const std::string& name, int64_t version) : lifecycle(name, version) {}
  VersionLifecycle lifecycle;
  // Guarded by the registry's mutex:
  std::shared_ptr<Model> model;  ///< from Ready until it unloads
  int64_t bytes = 0;             ///< measured at load; counted until it unloads
  /// When it failed or stopped serving for a reason (0: it did not), in the
  /// registry's order of events: the newest such version is what a model
  /// that serves nothing shows.
  uint64_t said_at = 0;
  /// It failed while another version of the model served (shown beside it).
  bool failed_beside_serving = false;
};
using VersionPtr = std::shared_ptr<LoadedVersion>;

class ModelRegistry {
 public:
  /// `on_demand`: a model that is not loaded loads on its first request (the
  /// index and the lookups say so).
  explicit ModelRegistry(bool on_demand) : on_demand_(on_demand) {}

  /// The serving version's handle, or `version`'s ("" or "-1": the serving
  /// one). NOT_FOUND for an unknown model or version, UNAVAILABLE if none
  /// serves. With leases (a memory budget), the handle holds one.
  StatusOr<std::shared_ptr<Model>> Get(const std::string& name, const std::string& version) const;
  /// Get for an inference request: also marks the model used at `use` (for
  /// least-recently-used eviction), under the same lock as the lease.
  StatusOr<std::shared_ptr<Model>> GetForRequest(const std::string& name,
                                                 const std::string& version, uint64_t use);
  /// The serving version's handle, or null.
  std::shared_ptr<Model> Serving(const std::string& name) const;
  bool Serves(const std::string& name) const;
  /// Whether it has a record (a load of it was asked for once).
  bool HasRecord(const std::string& name) const;
  /// Whether the repository had a valid archive of it at the last scan.
  bool InRepository(const std::string& name) const;
  void AddRepositoryNames(const std::vector<RepositoryEntry>& entries);
  void AddRepositoryName(const std::string& name) const;
  /// Every model of `scan` (the repository now; null when it could not be
  /// read) and every model with a record. It also remembers the scan's valid names.
  std::vector<ModelStatus> Index(const std::vector<RepositoryEntry>* scan) const;
  std::vector<std::shared_ptr<Model>> ReadyModels() const;
  /// Never evicted: loaded at start.
  void Pin(const std::vector<std::string>& names);
  /// What the model's Python measured per interpreter at its last load (0 before it).
  int64_t SlotBytesSeen(const std::string& name) const;

  // Transitions, each in one place.
  /// A load of `version` begins (Loading).
  /// Each transition below returns its lifecycle's answer: INTERNAL (logged)
  /// for a move the lifecycle does not allow, a bug.
  VersionPtr BeginLoad(const std::string& name, int64_t version);
  /// A load of `name` found no archive: shown when no version serves.
  Status NotInRepository(const std::string& name, const Status& why);
  /// Loading -> Failed.
  Status Failed(const VersionPtr& version, const Status& why);
  /// Loading -> Ready: takes new requests from now on; `use` marks it used
  /// (0: not). What failed or was unloaded before is no longer shown.
  Status Serve(const VersionPtr& version, std::shared_ptr<Model> model, int64_t bytes, uint64_t use);
  /// The version that serves `name`, or null.
  VersionPtr ServingLocked(const std::string& name) const REQUIRES(mu_);
  /// Ready -> Draining: `reason` ("" when a newer version replaced it) is what
  /// the index shows.
  Status StopServingLocked(const VersionPtr& version, const std::string& reason) REQUIRES(mu_);
  /// Draining -> Unloading: returns its handle, which the registry lets go.
  StatusOr<std::shared_ptr<Model>> StartUnload(const VersionPtr& version);
  /// Unloading -> Unloaded: a replaced version is forgotten.
  Status FinishUnload(const VersionPtr& version);

  // The budget's view.
  /// Every serving, loading and draining version (`loading`'s are not evictable).
  std::vector<ResidentModel> ResidentLocked(const std::string& loading) const REQUIRES(mu_);
  /// Versions that are draining or unloading, of every model.
  std::vector<VersionPtr> RetiringLocked() const REQUIRES(mu_);

  /// The registry's lock, for a caller that composes the *Locked calls.
  Mutex& mu() const RETURN_CAPABILITY(mu_) { return mu_; }

 private:
  struct Record {
    std::vector<VersionPtr> versions;  ///< in the order their loads began
    bool pinned = false;
    uint64_t last_used = 0;
    int64_t slot_bytes_seen = 0;
  };
  // The caller holds mu_ for these (static: the analysis cannot name it).
  static VersionPtr ServingOf(const Record& record);
  static VersionPtr LoadingOf(const Record& record);
  /// What a model that neither serves nor loads shows: its newest word, or null.
  static VersionPtr LastWordOf(const Record& record);
  /// Forgets the versions that have ended (Failed, Unloaded) and `which` accepts.
  template <typename Which>
  static void Forget(Record& record, Which which);
  std::shared_ptr<Model> Leased(const std::shared_ptr<Model>& model) const REQUIRES(mu_);
  StatusOr<std::shared_ptr<Model>> GetLocked(const std::string& name,
                                             const std::string& version) const REQUIRES(mu_);

  const bool on_demand_;
  mutable Mutex mu_;
  std::map<std::string, Record> records_ GUARDED_BY(mu_);
  mutable std::set<std::string> repository_names_ GUARDED_BY(mu_);  // valid at the last scan
  uint64_t said_ GUARDED_BY(mu_) = 0;                               // orders LoadedVersion::said_at
};

}  // namespace manypy
