// Checks on a client's repository load request beyond its name (the model
// name's own checks are server/lifecycle/model_name.h): models load only by name,
// never with a configuration or files a client sends. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

/// INVALID_ARGUMENT naming the first parameter when a load request carries any:
/// Triton's `config` (a model configuration in the request) and `file:<path>`
/// (model files in the request) would let a client choose what runs, and manypy
/// takes no other load parameter.
Status CheckLoadParameters(const std::vector<std::string>& parameter_names);

}  // namespace manypy
