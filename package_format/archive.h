// PackageArchive: one manypy model archive (package_format/SCHEMA.md), validated with libzip
// before anything else sees it, and kept open on the file it validated. Immutable after Open;
// ReadEntry serializes its libzip use with a mutex, so every method is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "package_format/manifest.h"

struct zip;  // libzip's zip_t, kept out of this header

namespace manypy {

/// A tensor storage entry, stored uncompressed: its bytes are [data_offset, +size) of the file.
struct StoredRecord {
  std::string name;      ///< relative to the root folder, e.g. ".data/0.storage"
  uint64_t data_offset;  ///< absolute byte offset of the entry's data in the file, 64-aligned
  uint64_t size;
};

/// What Open refuses beyond the format rules (SCHEMA.md "Limits"); sizes are uncompressed.
struct ArchiveLimits {
  /// The archive file's size on disk, checked before anything is read from it.
  uint64_t max_file_bytes = uint64_t{32} << 30;
  uint64_t max_entries = 100000;
  uint64_t max_entry_bytes = uint64_t{8} << 30;
  uint64_t max_total_bytes = uint64_t{32} << 30;
  /// Uncompressed / compressed, checked for compressed entries above 64 KiB uncompressed.
  uint64_t max_compression_ratio = 100;
};

/// The entry name (relative to the archive's root folder) of `resource` in the dotted
/// `package`: ("model", "model.pt") -> "model/model.pt", ("a.b", "") -> "a/b/".
std::string ResourceEntryName(std::string package, const std::string& resource);

class PackageArchive {
 public:
  using Limits = ArchiveLimits;

  /// Opens and validates `path`: NOT_FOUND if there is no such file, INVALID_ARGUMENT naming
  /// the archive and the entry or manifest field for anything else wrong.
  /// (Open and Validate set and read zip_ before the archive is shared, which the
  /// lock analysis cannot see: exempt from it.)
  static StatusOr<std::unique_ptr<PackageArchive>> Open(const std::string& path, Limits limits = {})
      NO_THREAD_SAFETY_ANALYSIS;
  ~PackageArchive();
  PackageArchive(const PackageArchive&) = delete;
  PackageArchive& operator=(const PackageArchive&) = delete;

  const std::string& path() const { return path_; }
  /// The single top-level folder every entry lives under (torch.package names it after the file).
  const std::string& root() const { return root_; }
  const Manifest& manifest() const { return manifest_; }
  /// Entry names relative to root(), in central directory order.
  const std::vector<std::string>& entries() const { return entries_; }
  /// Every `.data/*.storage` entry, in central directory order.
  const std::vector<StoredRecord>& storages() const { return storages_; }
  /// Sum of the entries' uncompressed sizes.
  uint64_t total_bytes() const { return total_bytes_; }
  /// The size of the file as validated.
  uint64_t file_size() const { return file_size_; }
  /// The open file that was validated (owned here, close-on-exec): map this rather than
  /// reopening path(), which may have been replaced since.
  int fd() const { return fd_; }

  /// The uncompressed bytes of an entry (name relative to root()), CRC-checked. NOT_FOUND if
  /// there is no such entry.
  StatusOr<std::string> ReadEntry(const std::string& relative_name) const;

 private:
  PackageArchive() = default;
  Status Validate(const Limits& limits) NO_THREAD_SAFETY_ANALYSIS;  // before it is shared: Open
  Status CheckEntryPoint() const;
  StatusOr<std::string> ReadIndex(uint64_t index, const std::string& relative_name) const;
  Status Error(const std::string& problem) const;

  // Constant after Open.
  std::string path_;
  std::string root_;
  uint64_t file_size_ = 0;
  uint64_t total_bytes_ = 0;
  int fd_ = -1;
  Manifest manifest_;
  std::vector<std::string> entries_;
  std::vector<StoredRecord> storages_;
  std::unordered_map<std::string, uint64_t> index_;  // relative name -> libzip index

  mutable Mutex mu_;
  zip* zip_ GUARDED_BY(mu_) = nullptr;  // after Open (libzip handles are not thread-safe)
};

}  // namespace manypy
