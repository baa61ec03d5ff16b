#include "server/allocator_info.h"

#include <dlfcn.h>
#include <gperftools/tcmalloc.h>

namespace manypy {

std::string MallocName() {
  // Calling tc_version keeps the library linked (no --as-needed drop). Linked
  // is not enough: malloc itself must resolve into tcmalloc, which it does
  // only when tcmalloc comes before libc in the lookup order.
  void* malloc_fn = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info tc{}, m{};
  if (malloc_fn != nullptr && dladdr(reinterpret_cast<void*>(&tc_version), &tc) != 0 &&
      dladdr(malloc_fn, &m) != 0 && tc.dli_fbase == m.dli_fbase) {
    int major = 0, minor = 0;
    const char* patch = "";
    tc_version(&major, &minor, &patch);
    return "tcmalloc (gperftools " + std::to_string(major) + "." + std::to_string(minor) +
           (patch ? patch : "") + ")";
  }
  // Another malloc preloaded (jemalloc, say): name its library.
  if (malloc_fn != nullptr && m.dli_fname != nullptr &&
      std::string(m.dli_fname).find("libc.so") == std::string::npos) {
    return std::string("the malloc of ") + m.dli_fname;
  }
  return "glibc malloc";
}

}  // namespace manypy
