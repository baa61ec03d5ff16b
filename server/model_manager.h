// ModelManager: loads model versions from the repository into the pool, swaps
// versions without failing requests, unloads, and hands out short-lived
// ref-counted handles. Thread-safe. Lock order: load_mu_ before mu_; no GIL
// is ever taken while mu_ is held.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "interpreters/pool.h"
#include "server/model_repository.h"
#include "server/servable_model.h"

namespace manypy {

/// A model's place in the lifecycle:
///   (absent) -> LOADING -> READY -> UNLOADING -> UNAVAILABLE
///   LOADING -> UNAVAILABLE (load failed; reason says why)
///   READY -> LOADING (reload) -> READY: the old version serves until the new
///   one is ready, then drains as its in-flight requests finish.
enum class ModelState { kLoading, kReady, kUnloading, kUnavailable };
const char* ModelStateName(ModelState state);

struct ModelStatus {
  std::string name;
  int64_t version = 0;  ///< serving (or last attempted) version; 0 if none
  ModelState state = ModelState::kUnavailable;
  std::string reason;
};

class ModelManager {
 public:
  struct Options {
    std::string repository;
    bool explicit_control = false;            ///< false: load every model at start
    std::vector<std::string> startup_models;  ///< loaded at start in explicit mode
  };

  /// Loads the startup models. A model that fails to load is reported in the
  /// index, not as a Create failure; a missing repository is NOT_FOUND.
  static StatusOr<std::unique_ptr<ModelManager>> Create(InterpreterPool* pool, Options options);

  /// (Re)loads the newest version of `name` found in the repository.
  Status Load(const std::string& name);
  /// Stops serving `name`; in-flight requests finish on their handles.
  Status Unload(const std::string& name);

  /// The serving version, or `version` if given ("" or "-1" = serving one).
  /// NOT_FOUND for an unknown model or version, UNAVAILABLE if not ready.
  StatusOr<std::shared_ptr<ServableModel>> Get(const std::string& name,
                                               const std::string& version) const;
  /// Every model of the repository and every model known to the manager.
  std::vector<ModelStatus> Index() const;
  /// Handles of every ready model (for statistics).
  std::vector<std::shared_ptr<ServableModel>> ReadyModels() const;
  const ModelRepository& repository() const { return repository_; }

 private:
  ModelManager(InterpreterPool* pool, Options options)
      : pool_(pool), options_(std::move(options)), repository_(options_.repository) {}

  struct Slot {
    ModelStatus status;
    std::shared_ptr<ServableModel> serving;
  };

  InterpreterPool* const pool_;
  const Options options_;
  const ModelRepository repository_;

  std::mutex load_mu_;  // one load or unload at a time
  mutable std::mutex mu_;
  std::map<std::string, Slot> models_;  // guarded by mu_
};

}  // namespace manypy
