#include "server/inference/shared_memory_regions.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace manypy {
namespace {

std::string Errno() { return std::strerror(errno); }

// shm_open's names are one path component under /dev/shm: "/name". Checked
// here so that a key never reaches outside it ("/../x", "/a/b"), and never
// names another object than it says (shm_open reads up to a NUL: "/a\0/b").
Status CheckKey(const std::string& key) {
  if (key.size() < 2 || key[0] != '/' || key.find('/', 1) != std::string::npos || key == "/." ||
      key == "/.." || key.find('\0') != std::string::npos) {
    return InvalidArgument("shared memory key '" + key +
                           "' must be a POSIX shared-memory name: '/' and then a name without '/'");
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<SharedMemoryRegion>> SharedMemoryRegion::Map(std::string name,
                                                                      std::string key,
                                                                      uint64_t offset,
                                                                      uint64_t byte_size) {
  MANYPY_RETURN_IF_ERROR(CheckKey(key));
  std::string what = "shared memory region '" + name + "' (key '" + key + "')";
  if (byte_size == 0) return InvalidArgument(what + ": byte_size must be positive");
  int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd < 0) return InvalidArgument(what + ": cannot open the shared-memory object: " + Errno());
  struct stat st;
  if (fstat(fd, &st) != 0) {
    std::string why = Errno();
    close(fd);
    return InvalidArgument(what + ": cannot stat the shared-memory object: " + why);
  }
  uint64_t object_size = static_cast<uint64_t>(st.st_size);
  if (offset > object_size || byte_size > object_size - offset) {
    close(fd);
    return InvalidArgument(what + ": offset " + std::to_string(offset) + " + byte_size " +
                           std::to_string(byte_size) + " is past the object's end (" +
                           std::to_string(object_size) + " bytes)");
  }
  // mmap takes a page-aligned offset: map from the page holding `offset`.
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t start = offset - offset % page;
  const size_t length = static_cast<size_t>(byte_size + (offset - start));
  void* mapping = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       static_cast<off_t>(start));
  std::string why = Errno();
  close(fd);  // the mapping keeps the object
  if (mapping == MAP_FAILED) return InvalidArgument(what + ": cannot map it: " + why);
  std::shared_ptr<SharedMemoryRegion> region(new SharedMemoryRegion());
  region->name_ = std::move(name);
  region->key_ = std::move(key);
  region->offset_ = offset;
  region->byte_size_ = byte_size;
  region->mapping_ = mapping;
  region->mapping_size_ = length;
  region->data_ = static_cast<char*>(mapping) + (offset - start);
  return region;
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (mapping_ != nullptr) munmap(mapping_, mapping_size_);
}

Status SharedMemoryRegions::Register(const std::string& name, const std::string& key,
                                     uint64_t offset, uint64_t byte_size) {
  if (name.empty()) return InvalidArgument("a shared memory region needs a name");
  {
    MutexLock lock(mu_);
    if (regions_.count(name) != 0) {
      return AlreadyExists("shared memory region '" + name +
                           "' is already registered: unregister it first");
    }
  }
  // Mapped outside the lock: opening and mapping is a system call or three.
  auto region = SharedMemoryRegion::Map(name, key, offset, byte_size);
  if (!region.ok()) return region.status();
  MutexLock lock(mu_);
  if (!regions_.emplace(name, std::move(*region)).second) {
    return AlreadyExists("shared memory region '" + name +
                         "' is already registered: unregister it first");
  }
  return Status::Ok();
}

void SharedMemoryRegions::Unregister(const std::string& name) {
  MutexLock lock(mu_);
  if (name.empty()) {
    regions_.clear();
  } else {
    regions_.erase(name);
  }
}

StatusOr<std::vector<SharedMemoryRegions::Info>> SharedMemoryRegions::List(
    const std::string& name) const {
  MutexLock lock(mu_);
  std::vector<Info> out;
  for (const auto& [n, r] : regions_) {
    if (name.empty() || n == name) out.push_back({n, r->key(), r->offset(), r->byte_size()});
  }
  if (!name.empty() && out.empty()) {
    return NotFound("no system shared memory region named '" + name + "' is registered");
  }
  return out;
}

std::shared_ptr<const SharedMemoryRegion> SharedMemoryRegions::Find(const std::string& name) const {
  MutexLock lock(mu_);
  auto it = regions_.find(name);
  return it == regions_.end() ? nullptr : it->second;
}

}  // namespace manypy
