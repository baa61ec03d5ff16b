// Checks a tensor's shape against its manifest spec (batch dimension
// included when the model batches). Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "package_format/manifest.h"

namespace manypy {

std::string ShapeString(const std::vector<int64_t>& shape);

/// INVALID_ARGUMENT naming `what`, the shape and the expected shape, or the
/// batch-size range; on success *numel is the element count.
Status CheckShape(const std::string& what, const std::vector<int64_t>& shape,
                  const TensorSpec& spec, const Manifest& manifest, int64_t* numel);

}  // namespace manypy
