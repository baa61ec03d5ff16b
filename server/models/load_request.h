// Checks on a client's repository load/unload request, shared by the gRPC and
// HTTP frontends: models load only by name from the configured repository, never
// from a path or file contents a client chooses. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

/// INVALID_ARGUMENT unless `name` can be a model's name (a manifest's `name`:
/// 1-128 characters of [A-Za-z0-9_.-], not starting with '.'); a name that looks
/// like a path ('/', '\\', "..", NUL, absolute) is refused saying so.
Status CheckModelName(const std::string& name);

/// INVALID_ARGUMENT naming the first parameter when a load request carries any:
/// Triton's `config` (a model configuration in the request) and `file:<path>`
/// (model files in the request) would let a client choose what runs, and manypy
/// takes no other load parameter.
Status CheckLoadParameters(const std::vector<std::string>& parameter_names);

}  // namespace manypy
