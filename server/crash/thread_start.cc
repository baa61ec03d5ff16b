// The serving binary's own pthread_create: every thread, whoever starts it
// (std::thread, gRPC, OpenMP, libtorch, CPython), first gets an alternate
// signal stack (signal_stack.h), then runs what it was started for. The
// executable exports the symbol (server/CMakeLists.txt), so the dynamic
// linker binds every library's calls here, those loaded later with dlopen
// too; it forwards to libc's. Not built under a sanitizer, whose runtime
// defines pthread_create itself (and gives threads signal stacks of its own).
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "server/crash/signal_stack.h"

namespace {

using CreateFn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

struct ThreadStart {
  void* (*run)(void*);
  void* arg;
};

void* RunWithSignalStack(void* p) {
  const ThreadStart start = *static_cast<ThreadStart*>(p);
  delete static_cast<ThreadStart*>(p);
  manypy::GiveThisThreadASignalStack();
  return start.run(start.arg);
}

CreateFn LibcCreate() {
  static std::atomic<CreateFn> libc{nullptr};
  CreateFn f = libc.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    libc.store(f, std::memory_order_release);
  }
  return f;
}

}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*run)(void*),
                              void* arg) {
  CreateFn create = LibcCreate();
  if (create == nullptr) return EAGAIN;
  auto* start = new (std::nothrow) ThreadStart{run, arg};
  if (start == nullptr) return EAGAIN;
  const int rc = create(thread, attr, RunWithSignalStack, start);
  if (rc != 0) delete start;
  return rc;
}
