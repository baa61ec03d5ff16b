// ModelManager's on-demand loads and its memory budget: Acquire (the lookup
// that loads a model on its first request), Describe (metadata without a
// load), and the least-recently-used eviction that makes room for a load.
#include <filesystem>
#include <thread>

#include "server/inference/inference_observer.h"
#include "server/lifecycle/model_manager.h"
#include "server/log.h"

namespace manypy {
namespace {

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// How long a load waits for evicted or replaced versions still draining (a
// request that slipped in before the eviction) to free their memory before
// the budget refuses it.
constexpr auto kDrainWait = std::chrono::seconds(5);
// How long it waits for a busy model to turn idle. A request is answered
// before its worker has finished its bookkeeping (and its frontend drops the
// handle): a client's next request, for another model, may come first.
// Without this wait, sequential requests alternating between two models
// under --max-loaded-models=1 were refused now and then.
constexpr auto kBusyWait = std::chrono::seconds(1);

}  // namespace

void ModelManager::Acquire(const std::string& name, const std::string& version,
                           Clock::time_point deadline, std::function<bool()> cancelled,
                           Acquired done) {
  // Only on-demand mode evicts (and so needs the order of use) or loads here.
  if (!options_.on_demand) return done(Get(name, version));
  uint64_t now = ++use_clock_;
  StatusOr<std::shared_ptr<Model>> found = Get(name, version);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end()) it->second.last_used = now;
  }
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
  {
    // A model that serves another version than asked, or one the
    // repository does not have, is answered as it is.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && it->second.serving != nullptr) return false;
    if (it != models_.end() || repository_names_.count(name) > 0) return true;
  }
  if (!CheckModelName(name).ok() || looked_up.code() != StatusCode::kNotFound) return false;
  // Added to the repository since the last scan (a scan only stats files
  // whose validation it has kept, repository.h).
  if (!repository_.Latest(name).ok()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  repository_names_.insert(name);
  return true;
}

Status ModelManager::LoadOnDemand(const std::string& name) {
  if (stopping_) return Unavailable("the server is shutting down: model '" + name + "' was not loaded");
  Clock::time_point start = Clock::now();
  Status loaded = LoadModel(name, LoadCause::kOnDemand);
  if (!loaded.ok()) {
    // RESOURCE_EXHAUSTED (the budget) keeps its code; any other failure is
    // the model's: its requests get UNAVAILABLE, as when no version serves.
    if (loaded.code() == StatusCode::kResourceExhausted) return loaded;
    return Unavailable("model '" + name + "' failed to load on demand: " + loaded.message());
  }
  std::shared_ptr<Model> model;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && it->second.serving != nullptr) model = it->second.serving->model;
  }
  if (model != nullptr && model->load_times().load_seconds > 0) {
    double seconds = SecondsSince(start);
    Log(LogLevel::kInfo, "model " + name + " version " + std::to_string(model->version()) +
                             " loaded on demand (cold start) in " + std::to_string(static_cast<int64_t>(seconds * 1000)) +
                             " ms: " + FormatBytes(model->memory().total()) + "; " +
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && it->second.serving != nullptr) return found.status();  // another version
  }
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

int64_t ModelManager::EstimateBytes(const RepositoryEntry& entry) const {
  std::error_code ec;
  int64_t archive = static_cast<int64_t>(std::filesystem::file_size(entry.path, ec));
  if (ec) archive = 0;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slot_bytes_seen_.find(entry.name);
  return archive + (it == slot_bytes_seen_.end() ? 0 : it->second);
}

int64_t ModelManager::ResidentBytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t total = 0;
  for (const auto& r : Resident("")) total += r.bytes;
  return total;
}

std::vector<ResidentModel> ModelManager::Resident(const std::string& loading) const {
  std::map<std::pair<std::string, int64_t>, Dispatcher::ModelLoad> loads;
  for (auto& l : dispatcher_->Loads()) loads[{l.name, l.version}] = l;
  std::vector<ResidentModel> out;
  for (const auto& [name, e] : models_) {
    if (e.serving == nullptr) continue;
    ResidentModel r;
    r.name = name;
    r.version = e.serving->lifecycle.version();
    r.bytes = e.serving->bytes;
    r.last_used = e.last_used;
    r.pinned = e.pinned;
    const Dispatcher::ModelLoad& l = loads[{name, r.version}];
    // Only the manager holds the handle: no request between its lookup and
    // its hand-over to the scheduler, no nested call, no statistics reader.
    r.idle = l.queued == 0 && l.running == 0 && e.serving->model.use_count() == 1;
    r.evictable = name != loading;
    out.push_back(r);
  }
  for (const auto& v : retiring_) {  // still holding memory until unloaded
    ResidentModel r;
    r.name = v->lifecycle.name();
    r.version = v->lifecycle.version();
    r.bytes = v->bytes;
    r.evictable = false;
    out.push_back(r);
  }
  return out;
}

void ModelManager::Evict(const ResidentModel& victim, const std::string& for_model,
                         BackgroundThread& unloader) {
  ModelEntry& e = models_[victim.name];
  VersionPtr serving = std::move(e.serving);
  e.shown = {victim.name, victim.version, ModelState::kUnavailable,
             "evicted (least recently used) to make room for '" + for_model +
                 "'; loads on first request"};
  Log(LogLevel::kInfo, "model " + victim.name + " version " + std::to_string(victim.version) +
                           " evicted (least recently used, idle) to make room for " + for_model +
                           ": frees " + FormatBytes(victim.bytes));
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelEvicted(victim.name, victim.version, victim.bytes);
  }
  Retire(serving, unloader);  // idle: drains at once, then unloads
}

void ModelManager::FitAfterLoad(const std::string& name, LoadCause cause) {
  if (options_.budget.memory_bytes == 0 || ResidentBytes() <= options_.budget.memory_bytes) return;
  Status fitted = MakeRoom(name, 0, cause, /*adds_model=*/false);
  if (!fitted.ok()) {
    Log(LogLevel::kWarning, "model " + name + " measured more at load than its estimate and the "
                            "total passes the budget: " + fitted.message());
  }
}

Status ModelManager::MakeRoom(const std::string& name, int64_t needed, LoadCause cause,
                              bool adds_model) {
  BackgroundThread& unloader = UnloaderFor(cause);
  if (!options_.budget.enabled()) return Status::Ok();
  Clock::time_point start = Clock::now();
  for (;;) {
    EvictionPlan plan;
    bool draining = false, busy = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<ResidentModel> resident = Resident(name);
      plan = PlanLoad(options_.budget, resident, name, needed, options_.on_demand, adds_model);
      for (const auto& r : resident) {
        draining = draining || (!r.evictable && r.name != name);
        busy = busy || (r.evictable && !r.pinned && !r.idle);
      }
      if (plan.refusal.ok()) {
        for (const auto& victim : plan.victims) Evict(victim, name, unloader);
      }
    }
    if (plan.refusal.ok() && plan.victims.empty()) return Status::Ok();
    if (!plan.refusal.ok()) {
      Clock::duration waited = Clock::now() - start;
      bool wait = (draining && waited < kDrainWait) ||
                  (options_.on_demand && busy && waited < kBusyWait);
      if (!wait) return plan.refusal;
    }
    // The evicted versions drained at once (idle) and their unloads are
    // queued on the unloader: once it has run them their memory is back.
    // Versions still draining get a moment; then the plan is made again.
    unloader.Run([] {});
    if (!plan.refusal.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace manypy
