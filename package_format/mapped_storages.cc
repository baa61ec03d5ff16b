#include "package_format/mapped_storages.h"

#include <ATen/ATen.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "package_format/memfd_seal.h"

namespace manypy {

// Owns the sealed memfd and its one mapping; both go when the last tensor and
// MappedStorages let go.
struct MappedStorages::Mapping {
  int memfd = -1;
  uint8_t* base = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, size);
    if (memfd >= 0) close(memfd);
  }
};

namespace {

std::string Errno(const std::string& what) { return what + " failed: " + std::strerror(errno); }

// Copies `size` bytes of `from` into `to` inside the kernel (no user-space bounce buffer).
Status CopyFile(int from, int to, uint64_t size, const std::string& path) {
  off_t offset = 0;
  while (static_cast<uint64_t>(offset) < size) {
    ssize_t n = sendfile(to, from, &offset, size - offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(path + ": " + Errno("copying the archive into memory (sendfile)"));
    if (n == 0)
      return FailedPrecondition(path +
                                ": the file shrank while it was being loaded; load it again");
  }
  return Status::Ok();
}

bool SameFileState(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

const uint8_t* MappedStorages::base() const { return mapping_->base; }
uint64_t MappedStorages::size() const { return mapping_->size; }
std::string MappedStorages::copy_path() const {
  return "/proc/self/fd/" + std::to_string(mapping_->memfd);
}

StatusOr<std::shared_ptr<MappedStorages>> MappedStorages::Map(const PackageArchive& archive) {
  const std::string& path = archive.path();
  struct stat before;
  if (fstat(archive.fd(), &before) != 0) return Internal(path + ": " + Errno("fstat"));
  if (static_cast<uint64_t>(before.st_size) != archive.file_size())
    return FailedPrecondition(path + ": the file changed size since it was validated");
  auto mapping = std::make_shared<Mapping>();
  mapping->size = archive.file_size();
  // The name shows in /proc/PID/maps, so the copy is easy to find when measuring memory.
  std::string name = "manypy-archive:" + path.substr(path.find_last_of('/') + 1);
  mapping->memfd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (mapping->memfd < 0)
    return Status(StatusCode::kResourceExhausted, path + ": " + Errno("memfd_create"));
  if (ftruncate(mapping->memfd, static_cast<off_t>(mapping->size)) != 0)
    return Status(StatusCode::kResourceExhausted, path + ": " + Errno("sizing the in-memory copy"));
  Status copied = CopyFile(archive.fd(), mapping->memfd, mapping->size, path);
  if (!copied.ok()) return copied;
  // A rewrite racing the copy could mix old and new bytes: refuse rather than serve them.
  struct stat after;
  if (fstat(archive.fd(), &after) != 0) return Internal(path + ": " + Errno("fstat"));
  if (!SameFileState(before, after))
    return FailedPrecondition(path +
                              ": the file was modified while it was being loaded; load it again");
  // Mapped before it is sealed: kernels before 6.7 refuse a writable private mapping of a
  // memfd already sealed against writes; a private mapping never writes to the memfd.
  void* addr = mmap(nullptr, mapping->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, mapping->memfd, 0);
  if (addr == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted, path + ": " + Errno("mmap"));
  mapping->base = static_cast<uint8_t*>(addr);
  Status sealed = SealAgainstChanges(mapping->memfd, path);
  if (!sealed.ok()) return sealed;
  // The file's cached pages are no longer needed by this load: dropping them keeps the
  // archive in memory once (the copy), not twice. Advice only; failure changes nothing.
  posix_fadvise(archive.fd(), 0, 0, POSIX_FADV_DONTNEED);

  std::shared_ptr<MappedStorages> result(new MappedStorages());
  result->mapping_ = mapping;
  for (const StoredRecord& record : archive.storages()) {
    if (record.data_offset > mapping->size || record.size > mapping->size - record.data_offset)
      return Internal(path + ": storage '" + record.name + "' lies outside the file");
    // The deleter owns a reference to the mapping: the bytes live as long as any tensor.
    result->tensors_[record.name] = at::from_blob(
        mapping->base + record.data_offset, {static_cast<int64_t>(record.size)},
        [mapping](void*) {}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  }
  return result;
}

}  // namespace manypy
