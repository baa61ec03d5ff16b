// What may be a model's name: models load only by name from the configured
// repository, never from a path a client chooses. Pure functions; thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy {

/// INVALID_ARGUMENT unless `name` can be a model's name (a manifest's `name`:
/// 1-128 characters of [A-Za-z0-9_.-], not starting with '.'); a name that looks
/// like a path ('/', '\\', "..", NUL, absolute) is refused saying so.
Status CheckModelName(const std::string& name);

/// `s` as a message may show it: at most 200 characters, each unprintable one
/// as '?'.
std::string Printable(const std::string& s);

}  // namespace manypy
