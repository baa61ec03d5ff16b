// MappedStorages: an archive's tensor storages as uint8 CPU tensors over one private, sealed
// in-memory copy of the archive file. Immutable after Map; safe to share between threads.
// Each tensor keeps the copy alive, so tensors may outlive this object.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "package_format/archive.h"

namespace manypy {

class MappedStorages {
 public:
  /// Copies the file `archive` validated (through its open descriptor) into a sealed memfd
  /// (no grow, shrink or write: nobody, this process included, can change it), maps that
  /// MAP_PRIVATE and wraps each of its storages(). Why a copy: a mapping of the archive file
  /// itself turns any later truncation or in-place rewrite of that file on disk into SIGBUS
  /// (or silently changed weights) in every interpreter; the copy makes both impossible. It
  /// costs one read of the file at load and archive-size memory that the kernel cannot drop
  /// and re-read (shmem instead of page cache), still once per process for all interpreters.
  /// An accidental in-place write to a tensor copies the touched page (and is then seen by
  /// every holder of that tensor in this process). FAILED_PRECONDITION if the file changed
  /// size since it was validated or while it was copied.
  static StatusOr<std::shared_ptr<MappedStorages>> Map(const PackageArchive& archive);

  /// One 1-D uint8 tensor per storage record, keyed by the record name relative to the root
  /// (".data/0.storage"); data_ptr() == base() + the record's data_offset.
  const std::map<std::string, at::Tensor>& tensors() const { return tensors_; }
  /// The start and length of the mapping (the whole archive file).
  const uint8_t* base() const;
  uint64_t size() const;
  /// A path that opens the sealed copy ("/proc/self/fd/N"), valid while this object lives:
  /// readers in this process (Python's zip reader) see exactly the bytes the tensors hold,
  /// whatever happens to the archive's path on disk.
  std::string copy_path() const;

 private:
  struct Mapping;
  MappedStorages() = default;

  std::shared_ptr<Mapping> mapping_;
  std::map<std::string, at::Tensor> tensors_;
};

}  // namespace manypy
