// MappedStorages: an archive's tensor storages as uint8 CPU tensors over one private mapping
// of the archive file, without copying. Immutable after Map; safe to share between threads.
// Each tensor keeps the mapping alive, so tensors may outlive this object.
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
  /// Maps the file `archive` validated (through its open descriptor) and wraps each of its
  /// storages(). The mapping is MAP_PRIVATE and writable: an accidental in-place write copies
  /// the touched page instead of faulting or reaching the file (and is then seen by every
  /// holder of that tensor in this process). The file must not be truncated while mapped
  /// (replace archives by rename, never rewrite them in place).
  static StatusOr<std::shared_ptr<MappedStorages>> Map(const PackageArchive& archive);

  /// One 1-D uint8 tensor per storage record, keyed by the record name relative to the root
  /// (".data/0.storage"); data_ptr() == base() + the record's data_offset.
  const std::map<std::string, at::Tensor>& tensors() const { return tensors_; }
  /// The start and length of the mapping (the whole archive file).
  const uint8_t* base() const;
  uint64_t size() const;

 private:
  struct Mapping;
  MappedStorages() = default;

  std::shared_ptr<Mapping> mapping_;
  std::map<std::string, at::Tensor> tensors_;
};

}  // namespace manypy
