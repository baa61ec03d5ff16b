// VersionLifecycle: where one loaded model version is in its life, with the
// legal transitions written down and checked (after TF Serving's
// core/loader_harness.h). Thread-safe (a mutex of its own; take no other lock
// under it).
//
//   Loading --> Ready --> Draining --> Unloading --> Unloaded
//      |
//      +------> Failed
//
// Loading: the archive is opened and prepared on each interpreter in turn.
// Ready: it takes requests. Draining: it takes no new ones and finishes those
// queued and running (a reload or an unload retired it). Unloading: drained;
// its objects are being freed in each interpreter in turn. Unloaded and
// Failed are final. Any other transition is a bug: it is refused with
// INTERNAL naming both states, and the state stays as it was.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "common/mutex.h"
#include "common/status.h"

namespace manypy {

enum class VersionState { kLoading, kReady, kDraining, kUnloading, kUnloaded, kFailed };
const char* VersionStateName(VersionState state);

class VersionLifecycle {
 public:
  /// A version whose load has begun (constructing it is the first transition).
  VersionLifecycle(std::string name, int64_t version)
      : name_(std::move(name)), version_(version) {}

  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  VersionState state() const;
  /// Why it failed (Failed), or why it stopped serving (Drain's reason), else empty.
  std::string reason() const;

  // One method per transition.
  Status Ready();                     ///< Loading -> Ready
  Status Fail(std::string reason);    ///< Loading -> Failed
  /// Ready -> Draining; `reason` says why ("" when a newer version replaced it).
  Status Drain(std::string reason = "");
  Status StartUnload();               ///< Draining -> Unloading
  Status FinishUnload();              ///< Unloading -> Unloaded

 private:
  Status Move(VersionState from, VersionState to);

  const std::string name_;
  const int64_t version_;
  mutable Mutex mu_;
  VersionState state_ GUARDED_BY(mu_) = VersionState::kLoading;
  std::string reason_ GUARDED_BY(mu_);
};

}  // namespace manypy
