// VersionRetirer: takes a version out of service (Ready -> Draining: no new
// requests) and, once the dispatcher says it has drained, unloads it slot by
// slot on the thread it was given. Thread-safe; lock order: the registry's
// mutex, then the dispatcher's.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "common/mutex.h"
#include "server/inference/dispatcher.h"
#include "server/lifecycle/background_thread.h"
#include "server/lifecycle/model_leases.h"
#include "server/lifecycle/model_registry.h"

namespace manypy {

class VersionRetirer {
 public:
  /// Every argument must outlive the retirer; `events` is told of each unload.
  VersionRetirer(ModelRegistry* registry, Dispatcher* dispatcher, size_t slots,
                 std::shared_ptr<LeaseEvents> events);

  /// Stops serving `version` (`reason` as the index shows it, "" when a
  /// newer version replaces it) and unloads it on `unloader` once drained.
  /// REQUIRES: the registry's mutex held (callers reach the registry through
  /// their own pointer, which the analysis cannot equate with registry_).
  /// INTERNAL (a bug, logged) if `version` was not Ready.
  Status RetireLocked(const VersionPtr& version, const std::string& reason, BackgroundThread& unloader);
  /// Releases `executable` on every slot in turn, each held out of dispatch
  /// meanwhile, so that the other models serve on.
  void ReleaseEverySlot(Executable& executable);
  /// From now on drained versions are not unloaded (shutdown: left to the
  /// process's exit). Unloads already posted still run.
  void Stop();
  /// After Stop and the unloaders' last runs: warns of each version still
  /// running a call (stuck in native code) and leaves it be.
  void LeaveStuckVersions();

 private:
  /// Draining -> Unloading -> Unloaded, slot by slot.
  void UnloadDrained(const VersionPtr& version);

  // Lets the dispatcher's drained callbacks reach the retirer only until Stop
  // (the dispatcher outlives it).
  struct Guard {
    Mutex mu;
    VersionRetirer* retirer GUARDED_BY(mu) = nullptr;
  };

  ModelRegistry* const registry_;
  Dispatcher* const dispatcher_;
  const size_t slots_;
  const std::shared_ptr<LeaseEvents> events_;
  const std::shared_ptr<Guard> guard_ = std::make_shared<Guard>();
};

}  // namespace manypy
