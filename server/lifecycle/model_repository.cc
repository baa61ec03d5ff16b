#include "server/lifecycle/model_repository.h"

#include <algorithm>
#include <sys/stat.h>

#include <filesystem>
#include <set>

#include "package_format/archive.h"

namespace manypy {

namespace fs = std::filesystem;

StatusOr<std::vector<RepositoryEntry>> ModelRepository::Scan() const {
  std::error_code ec;
  if (!fs::is_directory(directory_, ec)) {
    return NotFound("model repository " + directory_ + " is not a directory");
  }
  std::vector<RepositoryEntry> entries;
  std::set<std::string> seen;
  for (const auto& file : fs::directory_iterator(directory_, ec)) {
    if (file.path().extension() != ".mpk" || !file.is_regular_file(ec)) continue;
    RepositoryEntry entry;
    entry.path = file.path().string();
    struct stat st {};
    bool stated = ::stat(entry.path.c_str(), &st) == 0;
    int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
    if (stated) {
      MutexLock lock(mu_);
      auto it = validated_.find(entry.path);
      if (it != validated_.end() && it->second.size == static_cast<uintmax_t>(st.st_size) &&
          it->second.mtime_ns == mtime_ns && it->second.inode == st.st_ino) {
        entries.push_back(it->second.entry);
        seen.insert(entry.path);
        continue;
      }
    }
    auto archive = PackageArchive::Open(entry.path, limits_);
    if (archive.ok()) {
      entry.name = (*archive)->manifest().name;
      entry.version = (*archive)->manifest().version;
    } else {
      entry.name = file.path().stem().string();
      entry.error = archive.status();
    }
    if (stated) {
      MutexLock lock(mu_);
      validated_[entry.path] = {static_cast<uintmax_t>(st.st_size), mtime_ns,
                                static_cast<uint64_t>(st.st_ino), entry};
    }
    seen.insert(entry.path);
    entries.push_back(std::move(entry));
  }
  {
    MutexLock lock(mu_);  // forget archives no longer there
    for (auto it = validated_.begin(); it != validated_.end();) {
      it = seen.count(it->first) > 0 ? std::next(it) : validated_.erase(it);
    }
  }
  if (ec) return Internal("cannot read model repository " + directory_ + ": " + ec.message());
  std::sort(entries.begin(), entries.end(), [](const RepositoryEntry& a, const RepositoryEntry& b) {
    return a.name != b.name ? a.name < b.name : a.version < b.version;
  });
  return entries;
}

StatusOr<RepositoryEntry> ModelRepository::Latest(const std::string& name) const {
  auto entries = Scan();
  if (!entries.ok()) return entries.status();
  const RepositoryEntry* best = nullptr;
  const RepositoryEntry* broken = nullptr;
  for (const auto& e : *entries) {
    if (e.name != name) continue;
    if (!e.error.ok()) broken = &e;
    else if (best == nullptr || e.version > best->version) best = &e;
  }
  if (best != nullptr) return *best;
  if (broken != nullptr) return broken->error;
  return NotFound("model '" + name + "' is not in the model repository " + directory_);
}

}  // namespace manypy
