// Alternate signal stacks: a stack overflow's SIGSEGV cannot run its handler
// on the stack that overflowed, so without one the kernel kills the process
// and no crash report is written. Every thread of the serving process gets
// one: main's at start (GiveThisThreadASignalStack), every other thread's as
// it starts, through the pthread_create of thread_start.cc, which the serving
// binary defines for itself and for every library it loads (gRPC's pollers,
// OpenMP's and libtorch's pools, CPython's threads). Thread-safe: each thread
// sets up and frees only its own.
#pragma once

#include <cstddef>

namespace manypy {

/// Bytes of each thread's alternate signal stack (plus a guard page below
/// it): room for faulthandler's dump, then the crash report's backtrace.
inline constexpr size_t kSignalStackBytes = 64 * 1024;

/// Maps an alternate signal stack for the calling thread, freed when the
/// thread ends. Does nothing when the thread already has one (faulthandler's,
/// a sanitizer's). False when the stack could not be mapped.
bool GiveThisThreadASignalStack();

/// True when the calling thread has an alternate signal stack.
bool ThisThreadHasASignalStack();

}  // namespace manypy
