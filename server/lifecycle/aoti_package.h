// ReadAotiPackage: what the server needs out of an AOTInductor .pt2 package
// (the zip torch._inductor.aoti_compile_and_package writes): the compiled
// shared object of its model and the device it was compiled for. A pure
// function over bytes (libzip, no libtorch); thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy {

struct AotiPackage {
  std::string so_name;        ///< the shared object's file name, e.g. "c6lq...as.so"
  std::string shared_object;  ///< its bytes
  std::string device;         ///< AOTI_DEVICE_KEY of its metadata: "cpu", "cuda"
};

/// The model "model" of the package `pt2` (its entries under
/// data/aotinductor/model/: one .so and its _metadata.json). INVALID_ARGUMENT
/// naming `where` for bytes that are not such a package (not a zip; no shared
/// object, e.g. a package of C++ sources only; no device).
StatusOr<AotiPackage> ReadAotiPackage(const std::string& pt2, const std::string& where);

}  // namespace manypy
