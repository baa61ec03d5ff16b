#include "server/lifecycle/model_manager.h"

#include "server/lifecycle/archive_loader.h"

namespace manypy {

ModelManager::ModelManager(size_t slots, Dispatcher* dispatcher, Options options)
    : slots_(slots),
      dispatcher_(dispatcher),
      options_(std::move(options)),
      repository_(options_.repository, options_.archive_limits),
      registry_(options_.on_demand),
      retirer_(&registry_, dispatcher, slots, events_),
      budget_(options_.budget, options_.on_demand, slots, &registry_, &retirer_, events_),
      context_{options_.loader, &repository_, &registry_, &budget_, &retirer_, dispatcher,
               &stats_, options_.response_cache, options_.serving, slots, &loader_,
               [this] { return ++use_clock_; },
               options_.budget.enabled() ? events_ : nullptr, options_.quarantine},
      startup_(&context_, {nullptr, &loader_, /*every_slot_at_once=*/true, false}),
      requested_(&context_, {&loader_, &loader_, false, false}),
      on_demand_(&context_, {nullptr, &demand_unloads_, false, /*for_request=*/true}) {}

StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(InterpreterPool* pool,
                                                            Dispatcher* dispatcher,
                                                            Options options) {
  auto manager = Open(pool, dispatcher, std::move(options));
  if (manager.ok()) (*manager)->LoadStartupModels();
  return manager;
}

StatusOr<std::unique_ptr<ModelManager>> ModelManager::Open(InterpreterPool* pool,
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
  manager->registry_.AddRepositoryNames(*entries);
  return manager;
}

void ModelManager::LoadStartupModels() {
  std::vector<std::string> names = options_.startup_models;
  if (!options_.explicit_control && !options_.on_demand) {
    auto entries = repository_.Scan();
    if (entries.ok()) {
      for (const auto& e : *entries) {
        if (names.empty() || names.back() != e.name) names.push_back(e.name);
      }
    }
  }
  for (const auto& name : names) {
    // A model that fails to load is logged and shown in the index; the others load on.
    if (Status loaded = LoadWith(startup_, name); !loaded.ok()) continue;
  }
  if (options_.on_demand) registry_.Pin(names);
}

Status ModelManager::LoadWith(LoadPipeline& pipeline, const std::string& name) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));  // a name, never a path
  MutexLock load_lock(load_mu_);
  return pipeline.Load(name);
}

Status ModelManager::Load(const std::string& name) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));
  if (options_.quarantine != nullptr) options_.quarantine->Lift(name);
  return LoadWith(requested_, name);
}

Status ModelManager::Unload(const std::string& name) {
  MANYPY_RETURN_IF_ERROR(CheckModelName(name));
  MutexLock load_lock(load_mu_);
  MutexLock lock(registry_.mu());
  VersionPtr serving = registry_.ServingLocked(name);
  if (serving == nullptr) return NotFound("model '" + name + "' is not loaded");
  // In-flight requests finish on their handles.
  return retirer_.RetireLocked(serving, "unloaded", loader_);
}

void ModelManager::LoadAsync(const std::string& name, std::function<void(const Status&)> done) {
  changes_->Post([this, name, done = std::move(done)] { done(Load(name)); });
}

void ModelManager::UnloadAsync(const std::string& name, std::function<void(const Status&)> done) {
  changes_->Post([this, name, done = std::move(done)] { done(Unload(name)); });
}

StatusOr<std::shared_ptr<Model>> ModelManager::Get(const std::string& name,
                                                   const std::string& version) const {
  return registry_.Get(name, version);
}

std::vector<ModelStatus> ModelManager::Index() const {
  auto scan = repository_.Scan();
  return registry_.Index(scan.ok() ? &*scan : nullptr);
}

std::vector<std::shared_ptr<Model>> ModelManager::ReadyModels() const {
  return registry_.ReadyModels();
}

ModelManager::~ModelManager() {
  stopping_ = true;  // on-demand loads still queued are refused
  changes_.reset();  // the changes asked for run first (nothing new comes now)
  demand_.reset();
  retirer_.Stop();      // no unload is posted from now on
  loader_.Run([] {});   // the unloads posted before have run
  demand_unloads_.Run([] {});
  retirer_.LeaveStuckVersions();
}

}  // namespace manypy
