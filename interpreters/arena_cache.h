// ArenaCache: keeps obmalloc arenas an interpreter frees, to hand them back on
// the next allocation. Thread-safe (one mutex; arenas change hands rarely).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

namespace manypy {

// CPython munmaps every empty 1 MiB arena. With several interpreters running
// on several cores of one process, each munmap is a TLB shootdown on every
// core; the reference spike measured 2 interpreters at 0.64x of one without
// this cache and 1.85x with it. Keyed by size: the same hook also allocates
// 16 KiB frame-stack chunks.
class ArenaCache {
 public:
  ArenaCache() = default;
  ArenaCache(const ArenaCache&) = delete;
  ArenaCache& operator=(const ArenaCache&) = delete;

  /// PyObjectArenaAllocator hooks; `self` is the ArenaCache.
  static void* Alloc(void* self, size_t size);
  static void Free(void* self, void* ptr, size_t size);

  /// Unmaps every cached arena (after the interpreter is finalized).
  void Drain();
  /// Unmaps cached arenas until at most `keep_bytes` stay cached, and returns
  /// the bytes unmapped: after a burst of frees (a model unloaded) the cache
  /// would otherwise keep the interpreter's Python heap at its high-water
  /// mark for good, while a small reserve still serves the steady churn.
  size_t Trim(size_t keep_bytes);
  size_t cached() const;

 private:
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;  // guarded by mu_
};

}  // namespace manypy
