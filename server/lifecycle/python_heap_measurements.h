// PythonHeapMeasurements: what a model's Python added to an interpreter's
// heap when it loaded, by archive file, so that a load measures it only
// once. Thread-safe (one mutex).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "common/mutex.h"

namespace manypy {

// Measuring takes tracemalloc on during the load, which made an
// allocation-heavy model's import five times slower (a 20,000-entry table
// built at import: 15 -> 75 ms). Every interpreter loads the same code and
// data from the same file, so the first interpreter's figure serves the
// others and every later load of that file (an evicted model loaded again on
// demand); a file rewritten or replaced is a new key, measured again.
class PythonHeapMeasurements {
 public:
  /// The one table of the process.
  static PythonHeapMeasurements& Shared();

  /// The key of the archive at `path` as it is now (`file`: its fstat):
  /// the path and the file's device, inode, size and modification time.
  static std::string Key(const std::string& path, const struct stat& file);

  std::optional<int64_t> Find(const std::string& key) const;
  /// Keeps `bytes` for `key`; past `capacity` keys, the oldest goes.
  void Record(const std::string& key, int64_t bytes);

  explicit PythonHeapMeasurements(size_t capacity = 4096) : capacity_(capacity) {}

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::map<std::string, std::pair<uint64_t, int64_t>> bytes_
      GUARDED_BY(mu_);  // key -> (order, bytes)
  uint64_t next_ GUARDED_BY(mu_) = 0;
};

}  // namespace manypy
