// ServingBinary: where the launcher finds the serving process's executable,
// PREFIX/libexec/manypy-serving beside its own PREFIX/bin/manypy-server (the
// build tree has the same layout). Plain function; thread-safe.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy {

/// The serving binary's path, from this executable's real path (symbolic
/// links to manypy-server followed). NOT_FOUND, naming the path looked at,
/// when it is missing or not executable.
StatusOr<std::string> ServingBinary();

}  // namespace manypy
