#include "server/lifecycle/python_heap_measurements.h"

#include <algorithm>

namespace manypy {

PythonHeapMeasurements& PythonHeapMeasurements::Shared() {
  static PythonHeapMeasurements* shared = new PythonHeapMeasurements();  // never destroyed
  return *shared;
}

std::string PythonHeapMeasurements::Key(const std::string& path, const struct stat& file) {
  return path + '\0' + std::to_string(file.st_dev) + ':' + std::to_string(file.st_ino) + ':' +
         std::to_string(file.st_size) + ':' + std::to_string(file.st_mtim.tv_sec) + '.' +
         std::to_string(file.st_mtim.tv_nsec);
}

std::optional<int64_t> PythonHeapMeasurements::Find(const std::string& key) const {
  MutexLock lock(mu_);
  auto it = bytes_.find(key);
  if (it == bytes_.end()) return std::nullopt;
  return it->second.second;
}

void PythonHeapMeasurements::Record(const std::string& key, int64_t bytes) {
  MutexLock lock(mu_);
  bytes_[key] = {next_++, bytes};
  if (bytes_.size() <= capacity_) return;
  auto oldest = std::min_element(bytes_.begin(), bytes_.end(), [](const auto& a, const auto& b) {
    return a.second.first < b.second.first;
  });
  bytes_.erase(oldest);
}

}  // namespace manypy
