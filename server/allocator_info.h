// Which malloc serves this process: manypy-server links gperftools' tcmalloc
// (see server/CMakeLists.txt), and the start log names it so that an operator
// can tell when a build or an LD_PRELOAD left glibc's malloc in its place.
#pragma once

#include <string>

namespace manypy {

/// "tcmalloc (gperftools 2.10)" when tcmalloc's malloc is the one in use,
/// "the malloc of <library>" for another preloaded one, else "glibc malloc".
/// Thread-safe.
std::string MallocName();

}  // namespace manypy
