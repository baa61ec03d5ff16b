// ReadAotiPackage: where an archive's AOTInductor .pt2 keeps its model's compiled shared
// object (a byte range of the archive's file) and the device it was compiled for, read with
// pread from the zips' directories, never the shared object itself. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "package_format/archive.h"

namespace manypy {

struct AotiPackage {
  std::string so_name;  ///< the shared object's file name, e.g. "c6lq...as.so"
  uint64_t so_offset = 0;  ///< where its bytes start in the archive's file
  uint64_t so_size = 0;
  std::string device;  ///< AOTI_DEVICE_KEY of its metadata: "cpu", "cuda"
};

/// The model "model" of the package at `entry` (relative to the archive's
/// root) of `archive`: its entries under data/aotinductor/model/, one .so and
/// its _metadata.json. INVALID_ARGUMENT naming the archive for a package
/// that is compressed in the archive, is not a zip, holds no shared object
/// (e.g. a package of C++ sources only) or a compressed one, or names no
/// device; NOT_FOUND when there is no such entry.
StatusOr<AotiPackage> ReadAotiPackage(const PackageArchive& archive, const std::string& entry);

}  // namespace manypy
