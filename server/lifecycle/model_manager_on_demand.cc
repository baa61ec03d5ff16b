// ModelManager's on-demand side: Acquire (the lookup that loads a model on
// its first request, one load however many requests wait), LoadsOnRequest,
// and Describe (metadata without a load).
#include "server/inference/inference_observer.h"
#include "server/lifecycle/model_manager.h"
#include "server/log.h"

namespace manypy {

void ModelManager::Acquire(const std::string& name, const std::string& version,
                           Clock::time_point deadline, std::function<bool()> cancelled,
                           Acquired done) {
  // Only on-demand mode evicts (and so needs the order of use) or loads here.
  if (!options_.on_demand) return done(Get(name, version));
  StatusOr<std::shared_ptr<Model>> found = registry_.GetForRequest(name, version, ++use_clock_);
  const bool load = !found.ok() && LoadsOnRequest(name, found.status());
  if (!load) return done(std::move(found));
  LoadWaiters::Waiter waiter;
  waiter.deadline = deadline;
  waiter.cancelled = std::move(cancelled);
  waiter.done = [this, name, version, done = std::move(done)](const Status& loaded) {
    if (!loaded.ok()) return done(loaded);
    done(Get(name, version));
  };
  if (waiters_.Add(name, std::move(waiter))) {
    demand_->Post([this, name] { waiters_.Finish(name, LoadOnDemand(name)); });
  }
}

bool ModelManager::LoadsOnRequest(const std::string& name, const Status& looked_up) const {
  if (!options_.on_demand) return false;
  // A model that serves another version than asked, or one the repository
  // does not have, is answered as it is.
  if (registry_.Serves(name)) return false;
  if (registry_.HasRecord(name) || registry_.InRepository(name)) return true;
  if (!CheckModelName(name).ok() || looked_up.code() != StatusCode::kNotFound) return false;
  // Added to the repository since the last scan (a scan only stats files
  // whose validation it has kept, repository.h).
  if (!repository_.Latest(name).ok()) return false;
  registry_.AddRepositoryName(name);
  return true;
}

Status ModelManager::LoadOnDemand(const std::string& name) {
  if (stopping_) return Unavailable("the server is shutting down: model '" + name + "' was not loaded");
  const Clock::time_point start = Clock::now();
  Status loaded = [&] {
    MANYPY_RETURN_IF_ERROR(CheckModelName(name));
    MutexLock load_lock(load_mu_);
    if (registry_.Serves(name)) return Status::Ok();  // loaded meanwhile
    return on_demand_.Load(name);
  }();
  if (!loaded.ok()) {
    // RESOURCE_EXHAUSTED (the budget) keeps its code; any other failure is
    // the model's: its requests get UNAVAILABLE, as when no version serves.
    if (loaded.code() == StatusCode::kResourceExhausted) return loaded;
    return Unavailable("model '" + name + "' failed to load on demand: " + loaded.message());
  }
  std::shared_ptr<Model> model = registry_.Serving(name);
  if (model != nullptr && model->load_times().load_seconds > 0) {
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    Log(LogLevel::kInfo, "model " + name + " version " + std::to_string(model->version()) +
                             " loaded on demand (cold start) in " +
                             std::to_string(static_cast<int64_t>(seconds * 1000)) + " ms: " +
                             FormatBytes(model->memory().total()) + "; " +
                             FormatBytes(ResidentBytes()) + " resident" +
                             (options_.budget.memory_bytes > 0
                                  ? " of a " + FormatBytes(options_.budget.memory_bytes) + " budget"
                                  : ""));
    if (InferenceObserver* observer = GetInferenceObserver()) {
      observer->OnModelColdLoaded(name, model->version(), seconds);
    }
  }
  return Status::Ok();
}

StatusOr<ModelDescription> ModelManager::Describe(const std::string& name,
                                                  const std::string& version) const {
  auto found = Get(name, version);
  if (found.ok()) return ModelDescription{(*found)->manifest(), (*found)->settings()};
  if (!options_.on_demand || found.status().code() == StatusCode::kInvalidArgument) {
    return found.status();
  }
  if (registry_.Serves(name)) return found.status();  // another version
  auto entry = repository_.Latest(name);
  if (!entry.ok()) return found.status();
  if (!version.empty() && version != "-1" && version != std::to_string(entry->version)) {
    return NotFound("model '" + name + "' has no version '" + version + "' in the repository (newest: " +
                    std::to_string(entry->version) + ")");
  }
  auto archive = PackageArchive::Open(entry->path, options_.archive_limits);
  if (!archive.ok()) return archive.status();
  Manifest manifest = (*archive)->manifest();
  auto settings = ResolveModelSettings(manifest, options_.serving, slots_);
  if (!settings.ok()) return settings.status();
  return ModelDescription{std::move(manifest), std::move(*settings)};
}

}  // namespace manypy
