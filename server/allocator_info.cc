#include "server/allocator_info.h"

#include <dlfcn.h>
#if MANYPY_WITH_TCMALLOC
#include <gperftools/tcmalloc.h>
#endif

namespace manypy {

std::string MallocName() {
  // Where malloc resolves: tcmalloc serves it only when it comes before libc
  // in the lookup order (linked so, or preloaded).
  void* malloc_fn = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info m{};
  if (malloc_fn == nullptr || dladdr(malloc_fn, &m) == 0 || m.dli_fname == nullptr) {
    return "glibc malloc";
  }
#if MANYPY_WITH_TCMALLOC
  // Calling tc_version also keeps the library linked (no --as-needed drop).
  Dl_info tc{};
  if (dladdr(reinterpret_cast<void*>(&tc_version), &tc) != 0 && tc.dli_fbase == m.dli_fbase) {
    int major = 0, minor = 0;
    const char* patch = "";
    tc_version(&major, &minor, &patch);
    return "tcmalloc (gperftools " + std::to_string(major) + "." + std::to_string(minor) +
           (patch ? patch : "") + ")";
  }
#endif
  // Another malloc preloaded (jemalloc, say): name its library.
  if (std::string(m.dli_fname).find("libc.so") == std::string::npos) {
    return std::string("the malloc of ") + m.dli_fname;
  }
  return "glibc malloc";
}

}  // namespace manypy
