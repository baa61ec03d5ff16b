// ModelRepository: what a directory of model archives (*.mpk) offers, listed
// fresh on every Scan; an archive is validated again only when its file
// changed (size, modification time or inode). Thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "package_format/archive.h"

namespace manypy {

/// One archive found in the repository. An archive that fails validation is
/// listed too (under its file name, with `error` set) so operators see why.
struct RepositoryEntry {
  std::string name;
  int64_t version = 0;
  std::string path;
  Status error;
};

class ModelRepository {
 public:
  /// Archives over `limits` (size on disk included) are listed with their error.
  explicit ModelRepository(std::string directory, ArchiveLimits limits = {})
      : directory_(std::move(directory)), limits_(limits) {}

  /// Every *.mpk file of the directory (not recursive), validated; sorted by
  /// name, then version. NOT_FOUND if the directory does not exist.
  StatusOr<std::vector<RepositoryEntry>> Scan() const;

  /// The newest valid version of `name`; NOT_FOUND naming the repository if none.
  StatusOr<RepositoryEntry> Latest(const std::string& name) const;

 private:
  // One archive's validation, kept while its file stays the same: with a
  // hundred models, on-demand loads and index calls would otherwise open and
  // check every archive each time.
  struct Validated {
    uintmax_t size = 0;
    int64_t mtime_ns = 0;
    uint64_t inode = 0;
    RepositoryEntry entry;
  };

  const std::string directory_;
  const ArchiveLimits limits_;
  mutable Mutex mu_;
  mutable std::map<std::string, Validated> validated_ GUARDED_BY(mu_);  // by path
};

}  // namespace manypy
