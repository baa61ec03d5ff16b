#include "package_format/mapped_storages.h"

#include <ATen/ATen.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cstring>

namespace manypy {

// Owns one mmap of an archive file; unmapped when the last tensor and MappedStorages let go.
struct MappedStorages::Mapping {
  uint8_t* base = nullptr;
  uint64_t size = 0;
  ~Mapping() {
    if (base != nullptr) munmap(base, size);
  }
};

const uint8_t* MappedStorages::base() const { return mapping_->base; }
uint64_t MappedStorages::size() const { return mapping_->size; }

StatusOr<std::shared_ptr<MappedStorages>> MappedStorages::Map(const PackageArchive& archive) {
  struct stat st;
  if (fstat(archive.fd(), &st) != 0)
    return Internal(archive.path() + ": fstat failed: " + std::strerror(errno));
  // Mapping a file that shrank would turn reads past its end into SIGBUS.
  if (static_cast<uint64_t>(st.st_size) != archive.file_size())
    return FailedPrecondition(archive.path() + ": the file changed size since it was validated");
  auto mapping = std::make_shared<Mapping>();
  void* addr =
      mmap(nullptr, archive.file_size(), PROT_READ | PROT_WRITE, MAP_PRIVATE, archive.fd(), 0);
  if (addr == MAP_FAILED)
    return Status(StatusCode::kResourceExhausted,
                  archive.path() + ": mmap failed: " + std::strerror(errno));
  mapping->base = static_cast<uint8_t*>(addr);
  mapping->size = archive.file_size();

  std::shared_ptr<MappedStorages> result(new MappedStorages());
  result->mapping_ = mapping;
  for (const StoredRecord& record : archive.storages()) {
    if (record.data_offset > mapping->size || record.size > mapping->size - record.data_offset)
      return Internal(archive.path() + ": storage '" + record.name + "' lies outside the file");
    // The deleter owns a reference to the mapping: the bytes live as long as any tensor.
    result->tensors_[record.name] = at::from_blob(
        mapping->base + record.data_offset, {static_cast<int64_t>(record.size)},
        [mapping](void*) {}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  }
  return result;
}

}  // namespace manypy
