#include "server/lifecycle/model_repository.h"

#include <algorithm>
#include <filesystem>

#include "package_format/archive.h"

namespace manypy {

namespace fs = std::filesystem;

StatusOr<std::vector<RepositoryEntry>> ModelRepository::Scan() const {
  std::error_code ec;
  if (!fs::is_directory(directory_, ec)) {
    return NotFound("model repository " + directory_ + " is not a directory");
  }
  std::vector<RepositoryEntry> entries;
  for (const auto& file : fs::directory_iterator(directory_, ec)) {
    if (file.path().extension() != ".mpk" || !file.is_regular_file(ec)) continue;
    RepositoryEntry entry;
    entry.path = file.path().string();
    auto archive = PackageArchive::Open(entry.path, limits_);
    if (archive.ok()) {
      entry.name = (*archive)->manifest().name;
      entry.version = (*archive)->manifest().version;
    } else {
      entry.name = file.path().stem().string();
      entry.error = archive.status();
    }
    entries.push_back(std::move(entry));
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
