#include "server/inference/response_cache.h"

#include <cstring>

namespace manypy {
namespace {

// What an entry costs beyond its data: the list node, the index slot, the
// key and the Value vector (an estimate, so that a cache of tiny answers is
// still bounded by its bytes).
constexpr int64_t kEntryOverhead = 256;

int64_t DataBytes(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor:
      return static_cast<int64_t>(v.to_tensor().nbytes());
    case Value::Kind::kBytes:
      return static_cast<int64_t>(v.to_bytes().size());
    case Value::Kind::kStr:
      return static_cast<int64_t>(v.to_str().size());
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      int64_t n = 0;
      for (const Value& item : v.items()) n += DataBytes(item) + 16;
      return n;
    }
    case Value::Kind::kDict: {
      int64_t n = 0;
      for (const auto& [key, item] : v.dict_items()) n += DataBytes(key) + DataBytes(item) + 32;
      return n;
    }
    default:
      return 8;
  }
}

// A copy that shares nothing with the model: a model may return a tensor it
// writes into again later (a buffer it keeps), so the cache keeps its own.
Value PrivateCopy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor:
      return Value(v.to_tensor().clone(at::MemoryFormat::Contiguous));
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      Value::Items items;
      items.reserve(v.items().size());
      for (const Value& item : v.items()) items.push_back(PrivateCopy(item));
      return v.kind() == Value::Kind::kList ? Value::List(std::move(items))
                                            : Value::Tuple(std::move(items));
    }
    case Value::Kind::kDict: {
      Value::DictItems items;
      for (const auto& [key, item] : v.dict_items()) items.emplace_back(key, PrivateCopy(item));
      return Value::Dict(std::move(items));
    }
    default:
      return v;  // plain data: copied with the Value
  }
}

}  // namespace

size_t ResponseCache::KeyHash::operator()(const CacheKey& k) const {
  size_t h;
  memcpy(&h, k.digest.data(), sizeof(h));  // a SHA-256 is uniform already
  return h ^ (k.owner * 0x9e3779b97f4a7c15ULL);
}

uint64_t ResponseCache::NewOwner() {
  MutexLock lock(mu_);
  return next_owner_++;
}

int64_t ResponseCache::EntryBytes(const std::vector<Value>& outputs) {
  int64_t n = kEntryOverhead;
  for (const Value& v : outputs) n += DataBytes(v);
  return n;
}

std::optional<std::vector<Value>> ResponseCache::Find(const CacheKey& key) {
  MutexLock lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++totals_.misses;
    return std::nullopt;
  }
  ++totals_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->outputs;
}

bool ResponseCache::Insert(const CacheKey& key, const std::vector<Value>& outputs) {
  const int64_t bytes = EntryBytes(outputs);
  if (bytes > capacity_) return false;
  {
    MutexLock lock(mu_);
    if (dropped_.count(key.owner) != 0 || index_.count(key) != 0) return false;
  }
  // The copy outside the lock: it may be megabytes.
  Entry entry{key, {}, bytes};
  entry.outputs.reserve(outputs.size());
  for (const Value& v : outputs) entry.outputs.push_back(PrivateCopy(v));
  MutexLock lock(mu_);
  // Checked again: the version may have been dropped, or an identical
  // request stored its answer, while this one copied.
  if (dropped_.count(key.owner) != 0 || index_.count(key) != 0) return false;
  while (!lru_.empty() && totals_.bytes + bytes > capacity_) {
    EraseLocked(std::prev(lru_.end()));
    ++totals_.evictions;
  }
  lru_.push_front(std::move(entry));
  index_.emplace(key, lru_.begin());
  totals_.bytes += bytes;
  return true;
}

void ResponseCache::DropOwner(uint64_t owner) {
  // The tensors are freed after the lock is released.
  Lru dropped;
  {
    MutexLock lock(mu_);
    dropped_.insert(owner);
    for (auto it = lru_.begin(); it != lru_.end();) {
      auto next = std::next(it);
      if (it->key.owner == owner) {
        index_.erase(it->key);
        totals_.bytes -= it->bytes;
        dropped.splice(dropped.end(), lru_, it);
      }
      it = next;
    }
  }
}

void ResponseCache::EraseLocked(Lru::iterator it) {
  index_.erase(it->key);
  totals_.bytes -= it->bytes;
  lru_.erase(it);
}

ResponseCache::Totals ResponseCache::totals() const {
  MutexLock lock(mu_);
  Totals t = totals_;
  t.capacity_bytes = capacity_;
  t.entries = index_.size();
  return t;
}

}  // namespace manypy
