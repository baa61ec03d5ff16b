// ArenaCache: keeps obmalloc arenas an interpreter frees, to hand them back on
// the next allocation, and returns to the system the pages of the empty pools
// inside arenas still in use. Thread-safe (one mutex; arenas change hands
// rarely); ReleaseFreePools also needs the interpreter's GIL.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

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
  /// Gives the system back the pages of every empty pool inside the arenas
  /// the interpreter still uses, and returns their bytes. The caller holds
  /// the interpreter's GIL (nothing allocates there meanwhile).
  ///
  /// Why: obmalloc frees memory only by whole 1 MiB arenas, and one live
  /// object keeps its arena. A model's import fills arenas with its tables,
  /// while objects that outlive the model (caches, interned names) land among
  /// them; after the unload those arenas stay, nearly empty (make
  /// bench-many-models: 10 MiB of empty pools per interpreter, flat block
  /// count). What it relies on, from CPython 3.10 to 3.13 (the radix-tree
  /// obmalloc, the only one with 1 MiB arenas): 16 KiB pools aligned to
  /// 16 KiB inside the arena, each opening with its header, whose first field
  /// counts the pool's allocated blocks (0: empty, or never carved). The
  /// header's page stays (it links the arena's empty pools); the rest of the
  /// pool reads back as zeros, which obmalloc takes as the end of that pool's
  /// free list when it reuses it. The same hook allocates a thread's frame
  /// stack chunks, which open with their own size at offset 8: such an
  /// allocation is skipped.
  size_t ReleaseFreePools();
  size_t cached() const;

 private:
  mutable Mutex mu_;
  std::map<size_t, std::vector<void*>> free_ GUARDED_BY(mu_);
  std::unordered_map<void*, size_t> live_ GUARDED_BY(mu_);  // handed out, by address
};

}  // namespace manypy
