#include "server/model_manager.h"

#include "server/log.h"

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

StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(InterpreterPool* pool,
                                                            Options options) {
  std::unique_ptr<ModelManager> manager(new ModelManager(pool, std::move(options)));
  auto entries = manager->repository_.Scan();
  if (!entries.ok()) return entries.status();
  std::vector<std::string> names = manager->options_.startup_models;
  if (!manager->options_.explicit_control) {
    for (const auto& e : *entries) {
      if (names.empty() || names.back() != e.name) names.push_back(e.name);
    }
  }
  for (const auto& name : names) manager->Load(name);  // failures are in the index
  return manager;
}

Status ModelManager::Load(const std::string& name) {
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
  auto loaded = PackagedModel::Load(pool_, entry->path);
  std::shared_ptr<ServableModel> retired;
  std::lock_guard<std::mutex> lock(mu_);
  Slot& slot = models_[name];
  if (!loaded.ok()) {
    Log(LogLevel::kWarning, "loading model " + name + " failed: " + loaded.status().message());
    if (slot.serving == nullptr) {
      slot.status = {name, entry->version, ModelState::kUnavailable, loaded.status().message()};
    }
    return loaded.status();
  }
  retired = std::move(slot.serving);  // drains as its in-flight requests finish
  slot.serving = std::make_shared<ServableModel>(entry->path, std::move(*loaded));
  slot.status = {name, entry->version, ModelState::kReady, ""};
  Log(LogLevel::kVerbose, "model " + name + " version " + std::to_string(entry->version) +
                              " loaded from " + entry->path);
  return Status::Ok();
}

Status ModelManager::Unload(const std::string& name) {
  std::lock_guard<std::mutex> load_lock(load_mu_);
  std::shared_ptr<ServableModel> retired;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || it->second.serving == nullptr) {
    return NotFound("model '" + name + "' is not loaded");
  }
  retired = std::move(it->second.serving);
  it->second.status.state = ModelState::kUnavailable;
  it->second.status.reason = "unloaded";
  Log(LogLevel::kVerbose, "model " + name + " unloaded");
  return Status::Ok();
}

StatusOr<std::shared_ptr<ServableModel>> ModelManager::Get(const std::string& name,
                                                           const std::string& version) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return NotFound("unknown model '" + name + "'");
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
  if (entries.ok()) {
    for (const auto& e : *entries) {
      ModelStatus s{e.name, e.version, ModelState::kUnavailable, e.error.ok() ? "" : e.error.message()};
      out[{e.name, e.version}] = s;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, slot] : models_) out[{name, slot.status.version}] = slot.status;
  std::vector<ModelStatus> list;
  for (auto& [key, status] : out) list.push_back(std::move(status));
  return list;
}

std::vector<std::shared_ptr<ServableModel>> ModelManager::ReadyModels() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<ServableModel>> out;
  for (const auto& [name, slot] : models_) {
    if (slot.serving != nullptr) out.push_back(slot.serving);
  }
  return out;
}

}  // namespace manypy
