// SharedMemoryRegions: the system shared-memory regions clients registered
// (Triton's shared-memory extension, system part). A region is one POSIX
// shared-memory object (shm_open key) mapped once, read-write, at
// registration; requests that name it hold the mapping (a shared_ptr), so
// unregistering only removes the name: the memory stays mapped until the
// last request (and the last input tensor viewing it) lets go.
// Thread-safe: one mutex guards the name -> mapping table; a mapping itself
// is immutable once made.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace manypy {

/// One registered region, mapped. Its bytes are the client's: the server
/// reads inputs from them and writes outputs into them, nothing else.
class SharedMemoryRegion {
 public:
  /// Maps `byte_size` bytes at `offset` of the shared-memory object `key`
  /// ("/name", as shm_open takes it). INVALID_ARGUMENT naming the key for a
  /// malformed key, an object that cannot be opened, a zero size, or a range
  /// past the object's end (which would fault on first touch).
  static StatusOr<std::shared_ptr<SharedMemoryRegion>> Map(std::string name, std::string key,
                                                           uint64_t offset, uint64_t byte_size);
  ~SharedMemoryRegion();
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;

  const std::string& name() const { return name_; }
  const std::string& key() const { return key_; }
  uint64_t offset() const { return offset_; }
  uint64_t byte_size() const { return byte_size_; }
  /// The region's first byte (the object's byte `offset`).
  char* data() const { return data_; }

 private:
  SharedMemoryRegion() = default;

  std::string name_, key_;
  uint64_t offset_ = 0, byte_size_ = 0;
  void* mapping_ = nullptr;  // page-aligned start of the mmap
  size_t mapping_size_ = 0;
  char* data_ = nullptr;
};

/// `byte_size` bytes at `offset` of one region, held mapped while this lives.
struct SharedMemoryRef {
  std::shared_ptr<const SharedMemoryRegion> region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  char* data() const { return region->data() + offset; }
};

class SharedMemoryRegions {
 public:
  struct Info {
    std::string name, key;
    uint64_t offset = 0, byte_size = 0;
  };

  /// Maps and names a region. ALREADY_EXISTS when `name` is taken (as
  /// Triton: unregister it first); INVALID_ARGUMENT for an empty name or
  /// what SharedMemoryRegion::Map refuses.
  Status Register(const std::string& name, const std::string& key, uint64_t offset,
                  uint64_t byte_size);
  /// Removes `name` (empty: every region). A name that is not registered is
  /// not an error, as in Triton (clients unregister everything to clean up).
  /// Requests already holding a region keep it mapped until they finish.
  void Unregister(const std::string& name);
  /// The region called `name` (empty: all, by name). NOT_FOUND for an
  /// unknown name.
  StatusOr<std::vector<Info>> List(const std::string& name) const;
  /// The mapping of `name`, or null.
  std::shared_ptr<const SharedMemoryRegion> Find(const std::string& name) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<const SharedMemoryRegion>> regions_ GUARDED_BY(mu_);
};

}  // namespace manypy
