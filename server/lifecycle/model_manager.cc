#include "server/lifecycle/model_manager.h"

#include <algorithm>

#include "server/inference/batching_scheduler.h"
#include "server/inference/inference_observer.h"
#include "server/inference/sequence_scheduler.h"
#include "server/log.h"
#include "server/lifecycle/archive_loader.h"
#include "server/lifecycle/memory_release.h"
#include "server/lifecycle/reload_policy.h"
#include "server/lifecycle/warmup.h"

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
std::string NotLoadedReason(const std::string& name, bool on_demand) {
  if (on_demand) return "not loaded; loads on first request";
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
  auto entries = manager->repository_.Scan();
  if (!entries.ok()) return entries.status();
  for (const auto& e : *entries) {
    if (e.error.ok()) manager->repository_names_.insert(e.name);
  }
  std::vector<std::string> names = manager->options_.startup_models;
  if (!manager->options_.explicit_control && !manager->options_.on_demand) {
    for (const auto& e : *entries) {
      if (names.empty() || names.back() != e.name) names.push_back(e.name);
    }
  }
  for (const auto& name : names) manager->Load(name);  // failures are in the index
  if (manager->options_.on_demand) {
    std::lock_guard<std::mutex> lock(manager->mu_);
    for (const auto& name : names) {
      auto it = manager->models_.find(name);
      if (it != manager->models_.end()) it->second.pinned = true;
    }
  }
  manager->starting_ = false;
  return manager;
}

Status ModelManager::Load(const std::string& name) { return LoadModel(name, LoadCause::kRequested); }

Status ModelManager::LoadModel(const std::string& name, LoadCause cause) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));  // a name, never a path
  std::lock_guard<std::mutex> load_lock(load_mu_);
  if (cause == LoadCause::kOnDemand) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = models_.find(name);
    if (it != models_.end() && it->second.serving != nullptr) return Status::Ok();  // loaded meanwhile
  }
  auto entry = repository_.Latest(name);
  VersionPtr serving, wanted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entry.ok()) {
      // A name the repository does not have gets no entry: it stays NOT_FOUND.
      auto it = models_.find(name);
      if (it != models_.end() && it->second.serving == nullptr) {
        it->second.shown = {name, 0, ModelState::kUnavailable, entry.status().message()};
      }
      return entry.status();
    }
    ModelEntry& e = models_[name];
    serving = e.serving;  // a reloading model keeps serving it meanwhile
    wanted = std::make_shared<LoadedVersion>(name, entry->version);
    e.loading = wanted;
  }
  Status result = Status::Ok();
  for (;;) {
    ReloadStep step = AvailabilityPreservingNextStep(serving ? &serving->lifecycle : nullptr,
                                                     &wanted->lifecycle);
    if (step == ReloadStep::kDone) break;
    if (step == ReloadStep::kDrainOld) {
      std::lock_guard<std::mutex> lock(mu_);
      Retire(serving, loader_);  // drains, then unloads
      continue;
    }
    // kLoadNew. Loading runs Python in every interpreter: never under mu_.
    Clock::time_point start = Clock::now();
    StatusOr<std::shared_ptr<Model>> loaded = Internal("not loaded");
    const int64_t estimate = EstimateBytes(*entry);
    Status room = MakeRoom(name, estimate, cause);
    if (room.ok()) {
      loaded = LoadVersion(*entry, cause);
    } else {
      loaded = room;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ModelEntry& e = models_[name];
    e.loading = nullptr;
    if (!loaded.ok()) {
      result = loaded.status();
      wanted->lifecycle.Fail(result.message());
      Log(LogLevel::kWarning, "model " + name + " version " + std::to_string(entry->version) +
                                  " failed to load after " + Fixed(SecondsSince(start)) +
                                  " s: " + result.message());
      // A refusal by the budget is not the model failing (no load-failure
      // count, no ManypyModelLoadFailed alert): the index and the answer say it.
      InferenceObserver* observer = GetInferenceObserver();
      if (observer != nullptr && result.code() != StatusCode::kResourceExhausted) {
        observer->OnModelLoadFailed(name, entry->version, result);
      }
      ModelStatus failed{name, entry->version, ModelState::kUnavailable, result.message()};
      if (e.serving == nullptr) {
        e.shown = failed;
      } else if (entry->version != e.serving->lifecycle.version()) {
        e.failed = failed;  // the index shows why the newer version is not serving
      }
      continue;
    }
    wanted->model = std::move(*loaded);
    // An executable that measures nothing (TorchScript) counts as estimated.
    wanted->bytes = wanted->model->memory().total() > 0 ? wanted->model->memory().total() : estimate;
    slot_bytes_seen_[name] = wanted->model->memory().slot_total();
    wanted->lifecycle.Ready();
    if (cause == LoadCause::kOnDemand) e.last_used = ++use_clock_;  // its request uses it now
    e.serving = wanted;  // new handles get the new version from here on
    e.failed = {};
    e.shown = {};
  }
  // Its first load could only estimate what its Python holds; now measured.
  if (result.ok()) FitAfterLoad(name, cause);
  return result;
}

Status ModelManager::Unload(const std::string& name) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.serving == nullptr) {
    return NotFound("model '" + name + "' is not loaded");
  }
  ModelEntry& e = it->second;
  VersionPtr serving = std::move(e.serving);
  if (AvailabilityPreservingNextStep(&serving->lifecycle, nullptr) == ReloadStep::kDrainOld) {
    Retire(serving, loader_);
  }
  e.shown = {name, serving->lifecycle.version(), ModelState::kUnavailable, "unloaded"};
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
    if (repository_names_.count(name) > 0) {
      return NotFound(options_.on_demand
                          ? "model '" + name + "' is in the repository but not loaded: it loads on its first inference request"
                          : NotLoadedReason(name, false));
    }
    return NotFound("unknown model '" + name + "'");
  }
  const ModelEntry& e = it->second;
  if (e.serving == nullptr) {
    ModelState state = e.loading != nullptr ? ModelState::kLoading : e.shown.state;
    std::string reason = e.loading != nullptr ? "" : e.shown.reason;
    return Unavailable("model '" + name + "' is not ready (" + ModelStateName(state) +
                       (reason.empty() ? "" : ": " + reason) + ")");
  }
  const std::shared_ptr<Model>& model = e.serving->model;
  if (!version.empty() && version != "-1" && version != std::to_string(model->version())) {
    return NotFound("model '" + name + "' has no version '" + version + "' loaded (serving version " +
                    std::to_string(model->version()) + ")");
  }
  return model;
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
                                                       : NotLoadedReason(e.name, options_.on_demand);
      ModelStatus s{e.name, e.version, ModelState::kUnavailable, reason};
      s.not_loaded = e.error.ok() && models_.count(e.name) == 0;
      out[{e.name, e.version}] = s;
      if (e.error.ok()) repository_names_.insert(e.name);
    }
  }
  for (const auto& v : retiring_) {  // replaced by a newer version (an unloaded one shows so below)
    out[{v->lifecycle.name(), v->lifecycle.version()}] = {
        v->lifecycle.name(), v->lifecycle.version(), ModelState::kUnloading, ""};
  }
  for (const auto& [name, e] : models_) {
    if (e.serving == nullptr && e.loading == nullptr) out[{name, e.shown.version}] = e.shown;
    if (e.failed.version > 0) out[{name, e.failed.version}] = e.failed;
    if (e.loading != nullptr) {
      out[{name, e.loading->lifecycle.version()}] = {name, e.loading->lifecycle.version(),
                                                     ModelState::kLoading, ""};
    }
    if (e.serving != nullptr) {
      ModelStatus ready{name, e.serving->lifecycle.version(), ModelState::kReady, ""};
      ready.memory = e.serving->model->memory();
      out[{name, e.serving->lifecycle.version()}] = ready;
    }
  }
  std::vector<ModelStatus> list;
  for (auto& [key, status] : out) list.push_back(std::move(status));
  return list;
}

std::vector<std::shared_ptr<Model>> ModelManager::ReadyModels() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<Model>> out;
  for (const auto& [name, e] : models_) {
    if (e.serving != nullptr) out.push_back(e.serving->model);
  }
  return out;
}

StatusOr<std::shared_ptr<Model>> ModelManager::LoadVersion(const RepositoryEntry& entry,
                                                            LoadCause cause) {
  Clock::time_point start = Clock::now();
  Manifest m;
  auto loaded = options_.loader(entry.path, &m);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<Executable> executable = std::move(*loaded);
  auto settings = ResolveModelSettings(m, options_.serving, slots_);
  if (!settings.ok()) return settings.status();
  LoadTimes times;
  times.load_seconds = SecondsSince(start);
  Status prepared = PrepareEverySlot(*executable, m, settings->warmup_runs, cause, &times);
  if (!prepared.ok()) {
    if (starting_) {
      ReleaseEverySlot(*executable);
    } else {
      RunLoadWork(cause, [&] { ReleaseEverySlot(*executable); });
    }
    return prepared;
  }

  std::unique_ptr<Scheduler> scheduler;
  if (settings->sequences.enabled) {
    scheduler = std::make_unique<SequenceScheduler>(m.name, settings->max_queue_size,
                                                    settings->sequences);
  } else if (settings->batching.dynamic) {
    scheduler = std::make_unique<BatchingScheduler>(m.name, settings->max_queue_size,
                                                    m.max_batch_size, settings->batching);
  } else {
    scheduler = std::make_unique<FifoScheduler>(m.name, settings->max_queue_size);
  }
  ModelLimits limits{settings->instance_count, settings->max_execution, settings->sequences};
  auto queue = std::make_shared<DispatchedModel>(m, limits, std::move(scheduler), executable,
                                            stats_.For(m.name, m.version));
  dispatcher_->Add(queue);
  Log(LogLevel::kInfo, "model " + m.name + " version " + std::to_string(m.version) + " loaded from " +
                           entry.path + " in " + Fixed(times.load_seconds) + " s, warm-up " +
                           std::to_string(settings->warmup_runs) + " run(s) per instance in " +
                           Fixed(times.warmup_seconds) + " s; " +
                           std::to_string(settings->instance_count) + " instance(s)" +
                           (settings->batching.dynamic ? ", dynamic batching" : "") +
                           (settings->sequences.enabled ? ", stateful sequences" : ""));
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelLoaded(m.name, m.version, times.load_seconds, times.warmup_seconds);
    MemoryFootprint memory = executable->Memory();
    observer->OnModelMemory(m.name, m.version, memory.shared_bytes, memory.slot_total());
  }
  ResponseCache* cache = settings->response_cache ? options_.response_cache : nullptr;
  if (settings->response_cache && cache == nullptr) {
    Log(LogLevel::kWarning, "model " + m.name + " asks for the response cache, but the server "
                            "has none (--response-cache-bytes): its responses are not cached");
  }
  return std::make_shared<Model>(entry.path, std::move(*settings), times, executable->Memory(),
                                 std::move(queue), dispatcher_, cache);
}

void ModelManager::RunLoadWork(LoadCause cause, const std::function<void()>& work) {
  if (cause == LoadCause::kOnDemand) {
    work();  // on demand_, at normal priority
  } else {
    loader_.Run(work);
  }
}

Status ModelManager::PrepareEverySlot(Executable& executable, const Manifest& m,
                                      int64_t warmup_runs, LoadCause cause, LoadTimes* times) {
  struct SlotResult {
    Status status;
    double load_seconds = 0;
    double warmup_seconds = 0;
  };
  std::vector<SlotResult> results(slots_);
  // Loads and/or warms up `slot` in one hold of it: the slot serves again
  // only once both are done.
  auto on_slot = [&](size_t slot, bool load, bool warm) {
    SlotResult& r = results[slot];
    dispatcher_->RunOnSlot(slot, [&] {
      if (load) {
        Clock::time_point start = Clock::now();
        r.status = executable.Prepare(slot);
        r.load_seconds = SecondsSince(start);
      }
      if (warm && r.status.ok()) {
        Clock::time_point start = Clock::now();
        r.status = WarmUp(executable, m, slot, warmup_runs);
        r.warmup_seconds = SecondsSince(start);
      }
    });
  };
  // Once requests may come, one interpreter at a time (the others keep
  // answering: loading every interpreter at once stalled every model for the
  // length of the load, make soak's p99) and, unless a request waits for it,
  // on the background thread (the load's CPU must not delay the requests).
  // At the start, before any frontend listens, all at once, which is faster.
  if (!starting_) {
    for (size_t slot = 0; slot < slots_; ++slot) {
      // Under a budget, room for what the first interpreter measured is made
      // between its load and its warm-up: the weights' pages are resident
      // only from their first read, so the load's resident size stays within
      // the budget (made after the warm-up, a model's first load passed it by
      // that interpreter's Python heap until the eviction). The slot is let
      // go meanwhile, since what is evicted unloads on every slot; so only
      // then, as each let-go lets a queued request run in between.
      const bool reserve = slot == 0 && slots_ > 1 && options_.budget.enabled();
      RunLoadWork(cause, [&] { on_slot(slot, true, !reserve); });
      if (reserve && results[slot].status.ok()) {
        MANYPY_RETURN_IF_ERROR(ReserveMeasured(executable, m.name, cause));
        RunLoadWork(cause, [&] { on_slot(slot, false, true); });
      }
      times->load_seconds += results[slot].load_seconds;
      times->warmup_seconds += results[slot].warmup_seconds;
      if (!results[slot].status.ok()) return results[slot].status;
    }
    return Status::Ok();
  }
  // A torch.compile'd model's slots compile at once too: Inductor compiles
  // each kernel once under a file lock in the cache the interpreters share,
  // so the others wait for it and load it (measured with 2 interpreters:
  // ready 1.13x one interpreter's, against 1.32x with the first slot's
  // warm-up before the others', whose restarts were slower still).
  std::vector<std::thread> threads;
  for (size_t slot = 0; slot < slots_; ++slot) threads.emplace_back(on_slot, slot, true, true);
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

Status ModelManager::ReserveMeasured(const Executable& executable, const std::string& name,
                                     LoadCause cause) {
  MemoryFootprint measured = executable.Memory();
  if (!options_.budget.enabled() || measured.per_slot_bytes.empty()) return Status::Ok();
  int64_t first = measured.per_slot_bytes[0];
  return MakeRoom(name, measured.shared_bytes + first * static_cast<int64_t>(slots_), cause);
}

void ModelManager::ReleaseEverySlot(Executable& executable) {
  for (size_t slot = 0; slot < slots_; ++slot) {
    dispatcher_->RunOnSlot(slot, [&] { executable.Release(slot); });
  }
}

void ModelManager::Retire(const VersionPtr& version, BackgroundThread& unloader) {
  version->lifecycle.Drain();
  const std::shared_ptr<Model>& model = version->model;
  Log(LogLevel::kInfo, "model " + model->name() + " version " + std::to_string(model->version()) +
                           " retired: takes no new requests, unloads once drained (" +
                           std::to_string(model->queued()) + " queued)");
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelRetired(model->name(), model->version());
  }
  // Its cached answers go now; the requests it still runs store none.
  model->DropCachedResponses();
  retiring_.push_back(version);
  // Called under the dispatcher's lock as the version leaves: only hands the
  // unload on (the lock order is this mu_ before the dispatcher's, so no
  // taking mu_ here).
  dispatcher_->Retire(model->queue(), [guard = drain_guard_, version, unloader = &unloader] {
    std::lock_guard<std::mutex> lock(guard->mu);
    if (guard->manager == nullptr) return;  // shutting down: left to the process's exit
    ModelManager* manager = guard->manager;
    unloader->Post([manager, version] { manager->UnloadDrained(version); });
  });
}

void ModelManager::UnloadDrained(const VersionPtr& version) {
  std::shared_ptr<Model> model;
  {
    std::lock_guard<std::mutex> lock(mu_);
    version->lifecycle.StartUnload();
    model = std::move(version->model);
  }
  std::string what = model->name() + " version " + std::to_string(model->version());
  Clock::time_point start = Clock::now();
  // Slot by slot, each held out of dispatch, so that the other models serve
  // on while this one's objects are freed.
  ReleaseEverySlot(model->queue()->executable());
  // Drained: only handles taken before it left remain, and Submit gives
  // their requests back; the executable goes with the last of them.
  model.reset();
  version->lifecycle.FinishUnload();
  {
    std::lock_guard<std::mutex> lock(mu_);
    retiring_.erase(std::remove(retiring_.begin(), retiring_.end(), version), retiring_.end());
  }
  // What the allocator freed goes back to the system now, not whenever it
  // gets round to it: evictions make room for the next load (memory_release.h).
  ReturnFreeMemoryToSystem();
  Log(LogLevel::kInfo, "model " + what + " unloaded in " + Fixed(SecondsSince(start)) + " s");
}

ModelManager::~ModelManager() {
  stopping_ = true;  // on-demand loads still queued are refused
  changes_.reset();  // the changes asked for run first (nothing new comes now)
  demand_.reset();
  {
    std::lock_guard<std::mutex> lock(drain_guard_->mu);
    drain_guard_->manager = nullptr;  // no unload is posted from now on
  }
  loader_.Run([] {});  // the unloads posted before have run
  demand_unloads_.Run([] {});
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& v : retiring_) {
    if (v->lifecycle.state() == VersionState::kDraining && v->model != nullptr) {
      Log(LogLevel::kWarning, "model " + v->model->name() + " is still running a call; not unloaded");
      new std::shared_ptr<Model>(std::move(v->model));  // NOLINT: its interpreter is busy; leave it be
    }
  }
}

}  // namespace manypy
