#include "server/crash/crash_site.h"

#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

namespace manypy {
namespace {

// How far from the stack pointer a fault still counts as the stack's.
constexpr uintptr_t kOverflowReach = 64 * 1024;

uintptr_t StackPointer(const void* context) {
  if (context == nullptr) return 0;
  const mcontext_t& m = static_cast<const ucontext_t*>(context)->uc_mcontext;
#if defined(__x86_64__)
  return static_cast<uintptr_t>(m.gregs[REG_RSP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(m.sp);
#else
  (void)m;
  return 0;
#endif
}

}  // namespace

bool IsStackOverflow(int signal, const siginfo_t* info, const void* context) {
  const uintptr_t sp = StackPointer(context);
  if ((signal != SIGSEGV && signal != SIGBUS) || info == nullptr || info->si_code <= 0 || sp == 0) {
    return false;
  }
  const uintptr_t fault = reinterpret_cast<uintptr_t>(info->si_addr);
  return fault < sp + kOverflowReach && fault + kOverflowReach > sp;
}

bool IsFrontendThread(const char* name) {
  for (const char* prefix : {"manypy-http", "grpc", "default-executo", "resolver-execu"}) {
    if (strncmp(name, prefix, strlen(prefix)) == 0) return true;
  }
  return false;
}

}  // namespace manypy
