#include "server/models/model_manager.h"

#include <algorithm>

#include "server/inference/batching_scheduler.h"
#include "server/inference/inference_observer.h"
#include "server/log.h"
#include "server/models/archive_loader.h"
#include "server/models/warmup.h"

namespace manypy {

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnloading: return "UNLOADING";
    case ModelState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

namespace {

// Why a model of the repository answers no request: nothing loaded it.
std::string NotLoadedReason(const std::string& name) {
  return "model '" + name + "' is in the repository but not loaded: load it first (gRPC " +
         "RepositoryModelLoad, or HTTP POST /v2/repository/models/" + name + "/load)";
}

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string Fixed(double v) {
  char text[32];
  snprintf(text, sizeof(text), "%.2f", v);
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(InterpreterPool* pool,
                                                            Dispatcher* dispatcher,
                                                            Options options) {
  size_t slots = options.interpreters;
  if (pool != nullptr) {
    slots = pool->size();
  } else if (!options.loader) {
    return InvalidArgument("the model manager needs an interpreter pool or a loader");
  }
  if (slots == 0) return InvalidArgument("the model manager needs at least one interpreter");
  if (dispatcher->slots() < slots) {
    return InvalidArgument("the dispatcher has fewer slots than the model manager's interpreters");
  }
  if (!options.loader) {
    options.loader = [pool](const std::string& path, Manifest* manifest) {
      return LoadArchive(pool, path, manifest);
    };
  }
  std::unique_ptr<ModelManager> manager(new ModelManager(slots, dispatcher, std::move(options)));
  manager->retirer_ = std::thread([m = manager.get()] { m->UnloadRetired(); });
  auto entries = manager->repository_.Scan();
  if (!entries.ok()) return entries.status();
  for (const auto& e : *entries) {
    if (e.error.ok()) manager->repository_names_.insert(e.name);
  }
  std::vector<std::string> names = manager->options_.startup_models;
  if (!manager->options_.explicit_control) {
    for (const auto& e : *entries) {
      if (names.empty() || names.back() != e.name) names.push_back(e.name);
    }
  }
  for (const auto& name : names) manager->Load(name);  // failures are in the index
  manager->starting_ = false;
  return manager;
}

Status ModelManager::Load(const std::string& name) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));  // a name, never a path
  std::lock_guard<std::mutex> load_lock(load_mu_);
  auto entry = repository_.Latest(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entry.ok()) {
      // A name the repository does not have gets no entry: it stays NOT_FOUND.
      auto it = models_.find(name);
      if (it != models_.end() && it->second.serving == nullptr) {
        it->second.status = {name, 0, ModelState::kUnavailable, entry.status().message()};
      }
      return entry.status();
    }
    Slot& slot = models_[name];
    // A reloading model keeps serving its current version meanwhile.
    if (slot.serving == nullptr) slot.status = {name, entry->version, ModelState::kLoading, ""};
  }
  // Loading runs Python in every interpreter: never under mu_.
  Clock::time_point start = Clock::now();
  auto loaded = LoadVersion(*entry);
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = models_[name];
  if (!loaded.ok()) {
    Log(LogLevel::kWarning, "model " + name + " version " + std::to_string(entry->version) +
                                " failed to load after " + Fixed(SecondsSince(start)) +
                                " s: " + loaded.status().message());
    if (InferenceObserver* observer = GetInferenceObserver()) {
      observer->OnModelLoadFailed(name, entry->version, loaded.status());
    }
    ModelStatus failed{name, entry->version, ModelState::kUnavailable, loaded.status().message()};
    if (slot.serving == nullptr) {
      slot.status = failed;
    } else if (entry->version != slot.serving->version()) {
      slot.failed = failed;  // the index shows why the newer version is not serving
    }
    return loaded.status();
  }
  if (slot.serving != nullptr) Retire(std::move(slot.serving));  // drains, then unloads
  slot.failed = {};
  slot.serving = std::move(*loaded);
  slot.status = {name, entry->version, ModelState::kReady, ""};
  return Status::Ok();
}

Status ModelManager::Unload(const std::string& name) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.serving == nullptr) {
    return NotFound("model '" + name + "' is not loaded");
  }
  Retire(std::move(it->second.serving));
  it->second.status.state = ModelState::kUnavailable;
  it->second.status.reason = "unloaded";
  return Status::Ok();
}

void ModelManager::LoadAsync(const std::string& name, std::function<void(const Status&)> done) {
  changes_->Post([this, name, done = std::move(done)] { done(Load(name)); });
}

void ModelManager::UnloadAsync(const std::string& name, std::function<void(const Status&)> done) {
  changes_->Post([this, name, done = std::move(done)] { done(Unload(name)); });
}

StatusOr<std::shared_ptr<Model>> ModelManager::Get(const std::string& name,
                                                           const std::string& version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    if (repository_names_.count(name) > 0) return NotFound(NotLoadedReason(name));
    return NotFound("unknown model '" + name + "'");
  }
  const Slot& slot = it->second;
  if (slot.serving == nullptr) {
    return Unavailable("model '" + name + "' is not ready (" +
                       ModelStateName(slot.status.state) +
                       (slot.status.reason.empty() ? "" : ": " + slot.status.reason) + ")");
  }
  if (!version.empty() && version != "-1" && version != std::to_string(slot.serving->version())) {
    return NotFound("model '" + name + "' has no version '" + version + "' loaded (serving version " +
                    std::to_string(slot.serving->version()) + ")");
  }
  return slot.serving;
}

std::vector<ModelStatus> ModelManager::Index() const {
  std::map<std::pair<std::string, int64_t>, ModelStatus> out;
  auto entries = repository_.Scan();
  std::lock_guard<std::mutex> lock(mu_);
  if (entries.ok()) {
    for (const auto& e : *entries) {
      // A version beside the one that serves (or failed) keeps an empty reason.
      std::string reason = !e.error.ok()               ? e.error.message()
                           : models_.count(e.name) > 0 ? ""
                                                       : NotLoadedReason(e.name);
      ModelStatus s{e.name, e.version, ModelState::kUnavailable, reason};
      s.not_loaded = e.error.ok() && models_.count(e.name) == 0;
      out[{e.name, e.version}] = s;
      if (e.error.ok()) repository_names_.insert(e.name);
    }
  }
  for (const auto& [name, slot] : models_) {
    out[{name, slot.status.version}] = slot.status;
    if (slot.failed.version > 0) out[{name, slot.failed.version}] = slot.failed;
  }
  std::vector<ModelStatus> list;
  for (auto& [key, status] : out) list.push_back(std::move(status));
  return list;
}

std::vector<std::shared_ptr<Model>> ModelManager::ReadyModels() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Model>> out;
  for (const auto& [name, slot] : models_) {
    if (slot.serving != nullptr) out.push_back(slot.serving);
  }
  return out;
}

StatusOr<std::shared_ptr<Model>> ModelManager::LoadVersion(const RepositoryEntry& entry) {
  Clock::time_point start = Clock::now();
  Manifest m;
  auto loaded = options_.loader(entry.path, &m);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<Executable> executable = std::move(*loaded);
  auto settings = ResolveModelSettings(m, options_.serving, slots_);
  if (!settings.ok()) return settings.status();
  LoadTimes times;
  times.load_seconds = SecondsSince(start);
  Status prepared = PrepareEverySlot(*executable, m, settings->warmup_runs, &times);
  if (!prepared.ok()) {
    if (starting_) {
      ReleaseEverySlot(*executable);
    } else {
      loader_.Run([&] { ReleaseEverySlot(*executable); });
    }
    return prepared;
  }

  std::unique_ptr<Scheduler> scheduler;
  if (settings->dynamic_batching) {
    scheduler = std::make_unique<BatchingScheduler>(m.name, settings->max_queue_size,
                                                    m.max_batch_size, settings->batching);
  } else {
    scheduler = std::make_unique<FifoScheduler>(m.name, settings->max_queue_size);
  }
  ModelLimits limits{settings->instance_count, settings->max_execution};
  auto queue = std::make_shared<ModelQueue>(m, limits, std::move(scheduler), executable,
                                            stats_.For(m.name, m.version));
  dispatcher_->Add(queue);
  Log(LogLevel::kInfo, "model " + m.name + " version " + std::to_string(m.version) + " loaded from " +
                           entry.path + " in " + Fixed(times.load_seconds) + " s, warm-up " +
                           std::to_string(settings->warmup_runs) + " run(s) per instance in " +
                           Fixed(times.warmup_seconds) + " s; " +
                           std::to_string(settings->instance_count) + " instance(s)" +
                           (settings->dynamic_batching ? ", dynamic batching" : ""));
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelLoaded(m.name, m.version, times.load_seconds, times.warmup_seconds);
  }
  return std::make_shared<Model>(entry.path, std::move(*settings), times, std::move(queue),
                                 dispatcher_);
}

Status ModelManager::PrepareEverySlot(Executable& executable, const Manifest& m,
                                      int64_t warmup_runs, LoadTimes* times) {
  struct SlotResult {
    Status status;
    double load_seconds = 0;
    double warmup_seconds = 0;
  };
  std::vector<SlotResult> results(slots_);
  auto prepare = [&](size_t slot) {
    SlotResult& r = results[slot];
    dispatcher_->RunOnSlot(slot, [&] {
      Clock::time_point start = Clock::now();
      r.status = executable.Prepare(slot);
      r.load_seconds = SecondsSince(start);
      if (!r.status.ok()) return;
      start = Clock::now();
      r.status = WarmUp(executable, m, slot, warmup_runs);
      r.warmup_seconds = SecondsSince(start);
    });
  };
  // Once requests may come, one interpreter at a time (the others keep
  // answering: loading every interpreter at once stalled every model for the
  // length of the load, make soak's p99) and on the background thread (the
  // load's CPU must not delay the requests). At the start, before any
  // frontend listens, all at once, which is faster.
  if (!starting_) {
    for (size_t slot = 0; slot < slots_; ++slot) {
      loader_.Run([&] { prepare(slot); });
      times->load_seconds += results[slot].load_seconds;
      times->warmup_seconds += results[slot].warmup_seconds;
      if (!results[slot].status.ok()) return results[slot].status;
    }
    return Status::Ok();
  }
  std::vector<std::thread> threads;
  for (size_t slot = 0; slot < slots_; ++slot) threads.emplace_back(prepare, slot);
  for (auto& t : threads) t.join();
  double load = 0, warmup = 0;
  for (const SlotResult& r : results) {
    if (!r.status.ok()) return r.status;
    load = std::max(load, r.load_seconds);
    warmup = std::max(warmup, r.warmup_seconds);
  }
  times->load_seconds += load;
  times->warmup_seconds += warmup;
  return Status::Ok();
}

void ModelManager::ReleaseEverySlot(Executable& executable) {
  for (size_t slot = 0; slot < slots_; ++slot) {
    dispatcher_->RunOnSlot(slot, [&] { executable.Release(slot); });
  }
}

void ModelManager::Retire(std::shared_ptr<Model> model) {
  dispatcher_->Retire(model->queue());
  Log(LogLevel::kInfo, "model " + model->name() + " version " + std::to_string(model->version()) +
                           " retired: takes no new requests, unloads once drained (" +
                           std::to_string(model->queued()) + " queued)");
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelRetired(model->name(), model->version());
  }
  retired_.push_back(std::move(model));
  retired_cv_.notify_all();
}

void ModelManager::UnloadRetired() {
  // Unloads are background work too (gc in every interpreter): see background_thread.h.
  LowerThisThreadsPriority(kBackgroundNiceIncrement);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    std::vector<std::shared_ptr<Model>> drained;
    for (auto it = retired_.begin(); it != retired_.end();) {
      // Only this list holds the handle and only the handle holds the queue:
      // the unload (which takes every interpreter's GIL) happens right here.
      if (dispatcher_->Drained(*(*it)->queue()) && it->use_count() == 1 &&
          (*it)->queue().use_count() == 1) {
        drained.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
    if (!drained.empty()) {
      lock.unlock();
      for (auto& m : drained) {
        std::string what = m->name() + " version " + std::to_string(m->version());
        Clock::time_point start = Clock::now();
        // Slot by slot, each held out of dispatch, so that the other models
        // serve on while this one's objects are freed.
        ReleaseEverySlot(m->queue()->executable());
        m.reset();
        Log(LogLevel::kInfo, "model " + what + " unloaded in " + Fixed(SecondsSince(start)) + " s");
      }
      lock.lock();
      continue;
    }
    retired_cv_.wait_for(lock, std::chrono::milliseconds(retired_.empty() ? 1000 : 20));
  }
}

ModelManager::~ModelManager() {
  changes_.reset();  // the changes asked for run first (nothing new comes now)
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  retired_cv_.notify_all();
  if (retirer_.joinable()) retirer_.join();
  for (auto& m : retired_) {
    if (!dispatcher_->Drained(*m->queue())) {
      Log(LogLevel::kWarning, "model " + m->name() + " is still running a call; not unloaded");
      new std::shared_ptr<Model>(std::move(m));  // NOLINT: its interpreter is busy; leave it be
    }
  }
}

}  // namespace manypy
