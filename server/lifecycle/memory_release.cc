#include "server/lifecycle/memory_release.h"

#include <malloc.h>

// gperftools' C API, resolved at run time: defined when tcmalloc is linked
// (manypy-server), null in a program on glibc's malloc (the unit tests).
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));

namespace manypy {

void ReturnFreeMemoryToSystem() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else {
    malloc_trim(0);
  }
}

}  // namespace manypy
