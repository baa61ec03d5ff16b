#include "interpreters/arena_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace manypy {
namespace {

// obmalloc's layout from CPython 3.10 on (Objects/obmalloc.c, 3.13's
// pycore_obmalloc.h): ARENA_BITS 20 and POOL_BITS 14 with the radix tree.
constexpr size_t kObmallocArena = size_t{1} << 20;
constexpr size_t kObmallocPool = size_t{1} << 14;
// The most blocks a pool can hold (16-byte blocks): a larger count means the
// memory is not laid out as we expect, and it is left alone.
constexpr uint32_t kMostBlocksPerPool = kObmallocPool / 16;
// DUMMY_SIZE_IDX: the size class obmalloc gives a pool it has just carved,
// which makes it initialize the pool's free list when it first allocates.
constexpr uint32_t kNewPoolSizeClass = 0xffff;

// struct pool_header, CPython 3.10 to 3.13 (count shares its union with a
// pointer, hence 64 bits).
struct PoolHeader {
  uint64_t count;  // allocated blocks: the low 32 bits (little-endian only)
  uint64_t freeblock;
  uint64_t nextpool;
  uint64_t prevpool;
  uint32_t arenaindex;
  uint32_t szidx;
  uint32_t nextoffset;
  uint32_t maxnextoffset;
};
static_assert(sizeof(PoolHeader) == 48, "CPython's pool_header is 48 bytes on 64-bit");

}  // namespace

void* ArenaCache::Alloc(void* self, size_t size) {
  auto* cache = static_cast<ArenaCache*>(self);
  {
    MutexLock lock(cache->mu_);
    auto& list = cache->free_[size];
    if (!list.empty()) {
      void* p = list.back();
      list.pop_back();
      cache->live_.emplace(p, size);
      return p;
    }
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  MutexLock lock(cache->mu_);
  cache->live_.emplace(p, size);
  return p;
}

void ArenaCache::Free(void* self, void* ptr, size_t size) {
  auto* cache = static_cast<ArenaCache*>(self);
  MutexLock lock(cache->mu_);
  cache->live_.erase(ptr);
  cache->free_[size].push_back(ptr);
}

void ArenaCache::Drain() {
  MutexLock lock(mu_);
  for (auto& [size, list] : free_) {
    for (void* p : list) munmap(p, size);
  }
  free_.clear();
}

size_t ArenaCache::Trim(size_t keep_bytes) {
  MutexLock lock(mu_);
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

size_t ArenaCache::ReleaseFreePools() {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (page >= kObmallocPool || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) return 0;
  MutexLock lock(mu_);
  size_t released = 0;
  std::vector<char*> empty;
  for (const auto& [address, size] : live_) {
    if (size != kObmallocArena) continue;
    auto* base = static_cast<char*>(address);
    uint64_t chunk_size;
    std::memcpy(&chunk_size, base + 8, sizeof chunk_size);
    if (chunk_size == size) continue;  // a frame stack chunk, not an arena
    const uintptr_t start = reinterpret_cast<uintptr_t>(base);
    const uintptr_t first = (start + kObmallocPool - 1) & ~(kObmallocPool - 1);
    empty.clear();
    bool as_expected = true;
    for (uintptr_t pool = first; pool + kObmallocPool <= start + size; pool += kObmallocPool) {
      PoolHeader header;
      std::memcpy(&header, reinterpret_cast<const void*>(pool), sizeof header);
      const auto count = static_cast<uint32_t>(header.count);  // the union's uint
      if (count > kMostBlocksPerPool) {
        as_expected = false;
        break;
      }
      // Empty, once carved (an emptied pool's free list is never null), and
      // not released since (or reused and emptied again).
      if (count == 0 && header.freeblock != 0 && header.szidx != kNewPoolSizeClass) {
        empty.push_back(reinterpret_cast<char*>(pool));
      }
    }
    if (!as_expected) continue;
    for (char* pool : empty) {
      // The pool's free list runs through the pages that now read as zeros:
      // marked as a new pool, obmalloc rebuilds it when it takes the pool
      // again, as for a pool carved for the first time.
      const uint32_t fresh = kNewPoolSizeClass;
      std::memcpy(pool + offsetof(PoolHeader, szidx), &fresh, sizeof fresh);
      if (madvise(pool + page, kObmallocPool - page, MADV_DONTNEED) == 0) {
        released += kObmallocPool - page;
      }
    }
  }
  return released;
}

size_t ArenaCache::cached() const {
  MutexLock lock(mu_);
  size_t n = 0;
  for (const auto& [size, list] : free_) n += list.size();
  return n;
}

}  // namespace manypy
