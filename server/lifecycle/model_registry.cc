#include "server/lifecycle/model_registry.h"

#include <algorithm>
#include <utility>

namespace manypy {
namespace {

// Why a model of the repository answers no request: nothing loaded it.
std::string NotLoadedReason(const std::string& name, bool on_demand) {
  if (on_demand) return "not loaded; loads on first request";
  return "model '" + name + "' is in the repository but not loaded: load it first (gRPC " +
         "RepositoryModelLoad, or HTTP POST /v2/repository/models/" + name + "/load)";
}

bool Retiring(VersionState state) {
  return state == VersionState::kDraining || state == VersionState::kUnloading;
}

bool Ended(VersionState state) {
  return state == VersionState::kFailed || state == VersionState::kUnloaded;
}

}  // namespace

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnloading: return "UNLOADING";
    case ModelState::kUnavailable: return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

VersionPtr ModelRegistry::ServingOf(const Record& record) {
  // During a reload the old version is still Ready until it drains: the newest serves.
  for (auto it = record.versions.rbegin(); it != record.versions.rend(); ++it) {
    if ((*it)->lifecycle.state() == VersionState::kReady) return *it;
  }
  return nullptr;
}

VersionPtr ModelRegistry::LoadingOf(const Record& record) {
  for (const auto& v : record.versions) {
    if (v->lifecycle.state() == VersionState::kLoading) return v;
  }
  return nullptr;
}

VersionPtr ModelRegistry::LastWordOf(const Record& record) {
  VersionPtr last;
  for (const auto& v : record.versions) {
    if (v->said_at > 0 && !v->failed_beside_serving && (last == nullptr || v->said_at > last->said_at)) {
      last = v;
    }
  }
  return last;
}

template <typename Which>
void ModelRegistry::Forget(Record& record, Which which) {
  auto& v = record.versions;
  v.erase(std::remove_if(v.begin(), v.end(),
                         [&](const VersionPtr& p) { return Ended(p->lifecycle.state()) && which(*p); }),
          v.end());
}

std::shared_ptr<Model> ModelRegistry::Leased(const std::shared_ptr<Model>& model) const {
  if (model->leases() == nullptr) return model;
  // The handle holds a lease as long as any copy of it lives.
  struct Held {
    std::shared_ptr<Model> model;
    std::shared_ptr<void> lease;
  };
  auto held = std::make_shared<Held>(Held{model, model->leases()->Take()});
  return std::shared_ptr<Model>(held, held->model.get());
}

StatusOr<std::shared_ptr<Model>> ModelRegistry::GetLocked(const std::string& name,
                                                          const std::string& version) const {
  auto it = records_.find(name);
  if (it == records_.end()) {
    if (repository_names_.count(name) > 0) {
      return NotFound(on_demand_ ? "model '" + name +
                                       "' is in the repository but not loaded: it loads on its "
                                       "first inference request"
                                 : NotLoadedReason(name, false));
    }
    return NotFound("unknown model '" + name + "'");
  }
  const Record& r = it->second;
  VersionPtr serving = ServingOf(r);
  if (serving == nullptr) {
    VersionPtr last = LoadingOf(r) != nullptr ? nullptr : LastWordOf(r);
    ModelState state = LoadingOf(r) != nullptr ? ModelState::kLoading : ModelState::kUnavailable;
    std::string reason = last != nullptr ? last->lifecycle.reason() : "";
    return Unavailable("model '" + name + "' is not ready (" + ModelStateName(state) +
                       (reason.empty() ? "" : ": " + reason) + ")");
  }
  const std::shared_ptr<Model>& model = serving->model;
  if (!version.empty() && version != "-1" && version != std::to_string(model->version())) {
    return NotFound("model '" + name + "' has no version '" + version + "' loaded (serving version " +
                    std::to_string(model->version()) + ")");
  }
  return Leased(model);
}

StatusOr<std::shared_ptr<Model>> ModelRegistry::Get(const std::string& name,
                                                    const std::string& version) const {
  MutexLock lock(mu_);
  return GetLocked(name, version);
}

StatusOr<std::shared_ptr<Model>> ModelRegistry::GetForRequest(const std::string& name,
                                                              const std::string& version,
                                                              uint64_t use) {
  MutexLock lock(mu_);
  auto it = records_.find(name);
  if (it != records_.end()) it->second.last_used = use;
  return GetLocked(name, version);
}

std::shared_ptr<Model> ModelRegistry::Serving(const std::string& name) const {
  MutexLock lock(mu_);
  VersionPtr serving = ServingLocked(name);
  return serving != nullptr ? serving->model : nullptr;
}

bool ModelRegistry::Serves(const std::string& name) const { return Serving(name) != nullptr; }

bool ModelRegistry::HasRecord(const std::string& name) const {
  MutexLock lock(mu_);
  return records_.count(name) > 0;
}

bool ModelRegistry::InRepository(const std::string& name) const {
  MutexLock lock(mu_);
  return repository_names_.count(name) > 0;
}

void ModelRegistry::AddRepositoryNames(const std::vector<RepositoryEntry>& entries) {
  MutexLock lock(mu_);
  for (const auto& e : entries) {
    if (e.error.ok()) repository_names_.insert(e.name);
  }
}

void ModelRegistry::AddRepositoryName(const std::string& name) const {
  MutexLock lock(mu_);
  repository_names_.insert(name);
}

std::vector<ModelStatus> ModelRegistry::Index(const std::vector<RepositoryEntry>* scan) const {
  std::map<std::pair<std::string, int64_t>, ModelStatus> out;
  MutexLock lock(mu_);
  if (scan != nullptr) {
    for (const auto& e : *scan) {
      // A version beside the one that serves (or failed) keeps an empty reason.
      const bool known = records_.count(e.name) > 0;
      std::string reason = !e.error.ok() ? e.error.message()
                           : known       ? ""
                                         : NotLoadedReason(e.name, on_demand_);
      ModelStatus s{e.name, e.version, ModelState::kUnavailable, reason};
      s.not_loaded = e.error.ok() && !known;
      out[{e.name, e.version}] = s;
      if (e.error.ok()) repository_names_.insert(e.name);
    }
  }
  // Replaced versions draining (one unloaded for a reason shows that reason below).
  for (const auto& v : RetiringLocked()) {
    out[{v->lifecycle.name(), v->lifecycle.version()}] = {
        v->lifecycle.name(), v->lifecycle.version(), ModelState::kUnloading, ""};
  }
  for (const auto& [name, r] : records_) {
    VersionPtr serving = ServingOf(r), loading = LoadingOf(r);
    VersionPtr last = serving == nullptr && loading == nullptr ? LastWordOf(r) : nullptr;
    if (last != nullptr) {
      out[{name, last->lifecycle.version()}] = {name, last->lifecycle.version(),
                                                ModelState::kUnavailable, last->lifecycle.reason()};
    }
    for (const auto& v : r.versions) {  // why a newer version does not serve
      if (v->failed_beside_serving) {
        out[{name, v->lifecycle.version()}] = {name, v->lifecycle.version(),
                                               ModelState::kUnavailable, v->lifecycle.reason()};
      }
    }
    if (loading != nullptr) {
      out[{name, loading->lifecycle.version()}] = {name, loading->lifecycle.version(),
                                                   ModelState::kLoading, ""};
    }
    if (serving != nullptr) {
      ModelStatus ready{name, serving->lifecycle.version(), ModelState::kReady, ""};
      ready.memory = serving->model->memory();
      out[{name, serving->lifecycle.version()}] = ready;
    }
  }
  std::vector<ModelStatus> list;
  for (auto& [key, status] : out) list.push_back(std::move(status));
  return list;
}

std::vector<std::shared_ptr<Model>> ModelRegistry::ReadyModels() const {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<Model>> out;
  for (const auto& [name, r] : records_) {
    if (VersionPtr serving = ServingOf(r)) out.push_back(serving->model);
  }
  return out;
}

void ModelRegistry::Pin(const std::vector<std::string>& names) {
  MutexLock lock(mu_);
  for (const auto& name : names) {
    auto it = records_.find(name);
    if (it != records_.end()) it->second.pinned = true;
  }
}

int64_t ModelRegistry::SlotBytesSeen(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = records_.find(name);
  return it == records_.end() ? 0 : it->second.slot_bytes_seen;
}

VersionPtr ModelRegistry::BeginLoad(const std::string& name, int64_t version) {
  auto v = std::make_shared<LoadedVersion>(name, version);
  MutexLock lock(mu_);
  records_[name].versions.push_back(v);
  return v;
}

Status ModelRegistry::NotInRepository(const std::string& name, const Status& why) {
  MutexLock lock(mu_);
  // A name the repository does not have gets no record: it stays NOT_FOUND.
  auto it = records_.find(name);
  if (it == records_.end() || ServingOf(it->second) != nullptr) return Status::Ok();
  auto gone = std::make_shared<LoadedVersion>(name, 0);
  MANYPY_RETURN_IF_ERROR(gone->lifecycle.Fail(why.message()));
  gone->said_at = ++said_;
  Forget(it->second, [](const LoadedVersion& v) { return !v.failed_beside_serving; });
  it->second.versions.push_back(gone);
  return Status::Ok();
}

Status ModelRegistry::Failed(const VersionPtr& version, const Status& why) {
  MutexLock lock(mu_);
  Record& r = records_[version->lifecycle.name()];
  MANYPY_RETURN_IF_ERROR(version->lifecycle.Fail(why.message()));
  VersionPtr serving = ServingOf(r);
  if (serving != nullptr && serving->lifecycle.version() == version->lifecycle.version()) {
    // The serving version itself failed to load again: it serves on, nothing to show.
    r.versions.erase(std::remove(r.versions.begin(), r.versions.end(), version), r.versions.end());
    return Status::Ok();
  }
  const bool beside = serving != nullptr;
  // The newest failure replaces an older one; while nothing serves, also
  // what was shown before (an unload, an eviction).
  Forget(r, [&](const LoadedVersion& v) {
    return &v != version.get() && (v.failed_beside_serving == beside || !beside);
  });
  version->failed_beside_serving = beside;
  version->said_at = ++said_;
  return Status::Ok();
}

Status ModelRegistry::Serve(const VersionPtr& version, std::shared_ptr<Model> model, int64_t bytes,
                            uint64_t use) {
  MutexLock lock(mu_);
  Record& r = records_[version->lifecycle.name()];
  MANYPY_RETURN_IF_ERROR(version->lifecycle.Ready());
  version->model = std::move(model);
  version->bytes = bytes;
  r.slot_bytes_seen = version->model->memory().slot_total();
  if (use > 0) r.last_used = use;
  Forget(r, [](const LoadedVersion&) { return true; });
  for (auto& v : r.versions) v->failed_beside_serving = false;
  return Status::Ok();
}

VersionPtr ModelRegistry::ServingLocked(const std::string& name) const {
  auto it = records_.find(name);
  return it == records_.end() ? nullptr : ServingOf(it->second);
}

Status ModelRegistry::StopServingLocked(const VersionPtr& version, const std::string& reason) {
  MANYPY_RETURN_IF_ERROR(version->lifecycle.Drain(reason));
  if (reason.empty()) return Status::Ok();
  // It is what the model shows now: an older unload or eviction no longer.
  Forget(records_[version->lifecycle.name()], [](const LoadedVersion& v) {
    return v.lifecycle.state() == VersionState::kUnloaded || v.lifecycle.version() == 0;
  });
  version->said_at = ++said_;
  return Status::Ok();
}

StatusOr<std::shared_ptr<Model>> ModelRegistry::StartUnload(const VersionPtr& version) {
  MutexLock lock(mu_);
  MANYPY_RETURN_IF_ERROR(version->lifecycle.StartUnload());
  return std::move(version->model);
}

Status ModelRegistry::FinishUnload(const VersionPtr& version) {
  MutexLock lock(mu_);
  MANYPY_RETURN_IF_ERROR(version->lifecycle.FinishUnload());
  if (version->said_at > 0) return Status::Ok();  // unloaded or evicted: shown until something newer
  auto it = records_.find(version->lifecycle.name());
  if (it == records_.end()) return Status::Ok();
  auto& v = it->second.versions;
  v.erase(std::remove(v.begin(), v.end(), version), v.end());
  return Status::Ok();
}

std::vector<ResidentModel> ModelRegistry::ResidentLocked(const std::string& loading) const {
  std::vector<ResidentModel> out;
  for (const auto& [name, r] : records_) {
    VersionPtr serving = ServingOf(r);
    if (serving == nullptr) continue;
    ResidentModel m;
    m.name = name;
    m.version = serving->lifecycle.version();
    m.bytes = serving->bytes;
    m.last_used = r.last_used;
    m.pinned = r.pinned;
    // No request in flight: none between its lookup and its Finish, no nested
    // call, no reader of its metadata (each holds a lease).
    const auto& leases = serving->model->leases();
    m.idle = leases == nullptr || leases->idle();
    m.evictable = name != loading;
    out.push_back(m);
  }
  for (const auto& v : RetiringLocked()) {  // still holding memory until unloaded
    ResidentModel m;
    m.name = v->lifecycle.name();
    m.version = v->lifecycle.version();
    m.bytes = v->bytes;
    m.evictable = false;
    out.push_back(m);
  }
  return out;
}

std::vector<VersionPtr> ModelRegistry::RetiringLocked() const {
  std::vector<VersionPtr> out;
  for (const auto& [name, r] : records_) {
    for (const auto& v : r.versions) {
      if (Retiring(v->lifecycle.state())) out.push_back(v);
    }
  }
  return out;
}

}  // namespace manypy
