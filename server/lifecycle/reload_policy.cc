#include "server/lifecycle/reload_policy.h"

namespace manypy {

ReloadStep AvailabilityPreservingNextStep(const VersionLifecycle* serving,
                                          const VersionLifecycle* wanted) {
  if (wanted != nullptr && wanted->state() == VersionState::kLoading) return ReloadStep::kLoadNew;
  bool old_serves = serving != nullptr && serving->state() == VersionState::kReady;
  bool replaced = wanted == nullptr || wanted->state() == VersionState::kReady;
  if (old_serves && replaced) return ReloadStep::kDrainOld;
  return ReloadStep::kDone;
}

}  // namespace manypy
