// ResponseCache: the server's response cache (--response-cache-bytes): the
// outputs of earlier requests, kept by a digest of everything that decides
// them (cache_key.h), for the models that ask for it (response_cache=true),
// evicted least recently used by bytes. An entry belongs to one loaded model
// version (its owner id, unique per load), so a reload never answers from
// the old version's entries, and drops them.
// Thread-safe: one mutex, held only to find, insert or drop (never while
// tensors are copied or encoded).
#pragma once

#include <array>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"
#include "interpreters/value.h"

namespace manypy {

/// A request's cache key: the loaded version it is for and a SHA-256 of the rest.
struct CacheKey {
  uint64_t owner = 0;  ///< the loaded version (ResponseCache::NewOwner)
  std::array<uint8_t, 32> digest{};
  bool operator==(const CacheKey& o) const { return owner == o.owner && digest == o.digest; }
};

class ResponseCache {
 public:
  /// A cache of at most `capacity_bytes` of outputs (plus a small fixed
  /// overhead per entry, counted in the same bytes).
  explicit ResponseCache(int64_t capacity_bytes) : capacity_(capacity_bytes) {}

  /// A new owner id for one loaded model version (never 0, never reused).
  uint64_t NewOwner();

  /// The outputs stored for `key` (marking the entry most recently used), or
  /// none. The tensors are shared with the cache, which never changes them:
  /// read them, do not write into them.
  std::optional<std::vector<Value>> Find(const CacheKey& key);
  /// Stores a private copy of `outputs` (tensors cloned, contiguous) for
  /// `key`, evicting least recently used entries to make room. Outputs larger
  /// than the whole cache, or of an owner already dropped, are not stored.
  /// Returns whether it was stored.
  bool Insert(const CacheKey& key, const std::vector<Value>& outputs);
  /// Drops every entry of `owner` (its version was replaced or unloaded); a
  /// later Insert for it (a request that was still running) is refused.
  void DropOwner(uint64_t owner);

  struct Totals {
    int64_t capacity_bytes = 0;
    int64_t bytes = 0;      ///< held now
    uint64_t entries = 0;   ///< held now
    uint64_t evictions = 0; ///< entries evicted to make room, since start
    uint64_t hits = 0, misses = 0;
  };
  Totals totals() const;

  /// The bytes an entry of `outputs` takes (its tensors' and byte strings'
  /// sizes plus the per-entry overhead).
  static int64_t EntryBytes(const std::vector<Value>& outputs);

 private:
  struct KeyHash {
    size_t operator()(const CacheKey& k) const;
  };
  struct Entry {
    CacheKey key;
    std::vector<Value> outputs;
    int64_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // most recently used first

  void EraseLocked(Lru::iterator it) REQUIRES(mu_);

  const int64_t capacity_;
  mutable Mutex mu_;
  Lru lru_ GUARDED_BY(mu_);
  std::unordered_map<CacheKey, Lru::iterator, KeyHash> index_ GUARDED_BY(mu_);
  uint64_t next_owner_ GUARDED_BY(mu_) = 1;
  // Owners dropped (one per replaced or unloaded version: few).
  std::unordered_set<uint64_t> dropped_ GUARDED_BY(mu_);
  Totals totals_ GUARDED_BY(mu_);
};

}  // namespace manypy
