#include "interpreters/arena_cache.h"

#include <sys/mman.h>

namespace manypy {

void* ArenaCache::Alloc(void* self, size_t size) {
  auto* cache = static_cast<ArenaCache*>(self);
  {
    std::lock_guard<std::mutex> lock(cache->mu_);
    auto& list = cache->free_[size];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      return p;
    }
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

void ArenaCache::Free(void* self, void* ptr, size_t size) {
  auto* cache = static_cast<ArenaCache*>(self);
  std::lock_guard<std::mutex> lock(cache->mu_);
  cache->free_[size].push_back(ptr);
}

void ArenaCache::Drain() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [size, list] : free_) {
    for (void* p : list) munmap(p, size);
  }
  free_.clear();
}

size_t ArenaCache::Trim(size_t keep_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t kept = 0, released = 0;
  for (auto& [size, list] : free_) {
    const size_t room = keep_bytes > kept ? (keep_bytes - kept) / size : 0;
    while (list.size() > room) {
      munmap(list.back(), size);
      list.pop_back();
      released += size;
    }
    kept += list.size() * size;
  }
  return released;
}

size_t ArenaCache::cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [size, list] : free_) n += list.size();
  return n;
}

}  // namespace manypy
