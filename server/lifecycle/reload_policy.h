// The order in which a model moves from the version that serves to the one
// asked for (a reload: the repository's newest; an unload: none). Pure;
// thread-safe.
#pragma once

#include "server/lifecycle/version_lifecycle.h"

namespace manypy {

enum class ReloadStep {
  kLoadNew,   ///< load and warm up the version asked for
  kDrainOld,  ///< retire the serving version: it drains, then unloads
  kDone,      ///< nothing more to do (the new one serves, or it failed and the old one serves on)
};

/// Availability-preserving (TF Serving's availability_preserving_policy.h):
/// a model never goes without a ready version while one can serve. The new
/// version loads first (one interpreter at a time, while the others answer
/// with the old one), and only once it is ready does the old one drain; a
/// new version that fails leaves the old one serving. Its counterpart, a
/// resource-preserving policy, would drain first and load after, never
/// holding two versions at once.
/// `serving`: the version that serves, or null. `wanted`: the version being
/// brought in (created in Loading), or null for an unload.
ReloadStep AvailabilityPreservingNextStep(const VersionLifecycle* serving,
                                          const VersionLifecycle* wanted);

}  // namespace manypy
