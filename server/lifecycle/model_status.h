// What the repository index says of a model version (ModelStatus, in the
// protocol's words) and what metadata is made of (ModelDescription). Plain data.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "package_format/manifest.h"
#include "server/inference/executable.h"
#include "server/lifecycle/model_settings.h"

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

}  // namespace manypy
