#include "server/crash/signal_stack.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

namespace manypy {
namespace {

struct SignalStack {
  void* mapping;
  size_t bytes;
};

// At thread exit: the kernel forgets the stack before it is unmapped.
void FreeSignalStack(void* p) {
  auto* stack = static_cast<SignalStack*>(p);
  stack_t off{};
  off.ss_flags = SS_DISABLE;
  sigaltstack(&off, nullptr);
  munmap(stack->mapping, stack->bytes);
  delete stack;
}

pthread_key_t StackKey() {
  static const pthread_key_t key = [] {
    pthread_key_t k;
    pthread_key_create(&k, FreeSignalStack);
    return k;
  }();
  return key;
}

}  // namespace

bool ThisThreadHasASignalStack() {
  stack_t current{};
  return sigaltstack(nullptr, &current) == 0 && !(current.ss_flags & SS_DISABLE);
}

bool GiveThisThreadASignalStack() {
  if (ThisThreadHasASignalStack()) return true;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = kSignalStackBytes + page;
  // Reserved, not committed: pages are touched only if a signal runs there.
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                       -1, 0);
  if (mapping == MAP_FAILED) return false;
  // The lowest page is a guard: a handler that overflows this stack faults
  // instead of writing over whatever lies below.
  mprotect(mapping, page, PROT_NONE);
  stack_t stack{};
  stack.ss_sp = static_cast<char*>(mapping) + page;
  stack.ss_size = kSignalStackBytes;
  if (sigaltstack(&stack, nullptr) != 0) {
    munmap(mapping, bytes);
    return false;
  }
  pthread_setspecific(StackKey(), new SignalStack{mapping, bytes});
  return true;
}

}  // namespace manypy
