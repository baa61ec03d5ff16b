#include "server/lifecycle/memory_release.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

// gperftools' C API, resolved at run time: defined when tcmalloc is linked
// (manypy-server), null in a program on glibc's malloc (the unit tests).
extern "C" void MallocExtension_ReleaseFreeMemory(void) __attribute__((weak));
extern "C" int MallocExtension_GetNumericProperty(const char* property, size_t* value)
    __attribute__((weak));
extern "C" void MallocExtension_ReleaseToSystem(size_t num_bytes) __attribute__((weak));

namespace manypy {
namespace {

// malloc_trim works on glibc's own arenas: only call it when glibc's malloc
// serves the process. Under another malloc (AddressSanitizer's in the asan
// build, or one preloaded) those arenas were never set up and malloc_trim
// crashed in glibc's mtrim (found by make test-asan: composition_e2e_test).
bool GlibcMallocServes() {
  Dl_info info;
  return dladdr(reinterpret_cast<void*>(&malloc), &info) != 0 && info.dli_fname != nullptr &&
         std::strstr(info.dli_fname, "libc.so") != nullptr;
}

}  // namespace

void ReturnFreeMemoryToSystem() {
  if (MallocExtension_ReleaseFreeMemory != nullptr) {
    MallocExtension_ReleaseFreeMemory();
  } else if (GlibcMallocServes()) {
    malloc_trim(0);
  }
}

int64_t FreeBytesHeld() {
  if (MallocExtension_GetNumericProperty != nullptr) {
    size_t free_bytes = 0;
    return MallocExtension_GetNumericProperty("tcmalloc.pageheap_free_bytes", &free_bytes)
               ? static_cast<int64_t>(free_bytes)
               : 0;
  }
  return GlibcMallocServes() ? static_cast<int64_t>(mallinfo2().fordblks) : 0;
}

void ReturnFreeBytes(int64_t bytes) {
  if (bytes <= 0) return;
  if (MallocExtension_ReleaseToSystem != nullptr) {
    MallocExtension_ReleaseToSystem(static_cast<size_t>(bytes));
  } else if (GlibcMallocServes()) {
    malloc_trim(0);
  }
}

}  // namespace manypy
