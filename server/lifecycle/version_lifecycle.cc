#include "server/lifecycle/version_lifecycle.h"

#include "server/log.h"

namespace manypy {

const char* VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kLoading: return "LOADING";
    case VersionState::kReady: return "READY";
    case VersionState::kDraining: return "DRAINING";
    case VersionState::kUnloading: return "UNLOADING";
    case VersionState::kUnloaded: return "UNLOADED";
    case VersionState::kFailed: return "FAILED";
  }
  return "UNKNOWN";
}

VersionState VersionLifecycle::state() const {
  MutexLock lock(mu_);
  return state_;
}

std::string VersionLifecycle::reason() const {
  MutexLock lock(mu_);
  return reason_;
}

Status VersionLifecycle::Move(VersionState from, VersionState to) {
  MutexLock lock(mu_);
  if (state_ != from) {
    Status bug = Internal("model " + name_ + " version " + std::to_string(version_) +
                          ": no transition from " + VersionStateName(state_) + " to " +
                          VersionStateName(to) + " (only from " + VersionStateName(from) + ")");
    Log(LogLevel::kError, bug.message());
    return bug;
  }
  state_ = to;
  return Status::Ok();
}

Status VersionLifecycle::Ready() { return Move(VersionState::kLoading, VersionState::kReady); }

Status VersionLifecycle::Fail(std::string reason) {
  Status moved = Move(VersionState::kLoading, VersionState::kFailed);
  if (moved.ok()) {
    MutexLock lock(mu_);
    reason_ = std::move(reason);
  }
  return moved;
}

Status VersionLifecycle::Drain(std::string reason) {
  Status moved = Move(VersionState::kReady, VersionState::kDraining);
  if (moved.ok()) {
    MutexLock lock(mu_);
    reason_ = std::move(reason);
  }
  return moved;
}

Status VersionLifecycle::StartUnload() {
  return Move(VersionState::kDraining, VersionState::kUnloading);
}

Status VersionLifecycle::FinishUnload() {
  return Move(VersionState::kUnloading, VersionState::kUnloaded);
}

}  // namespace manypy
