// What the crash handler reads from a fatal signal itself: whether it is a
// stack overflow, and whether the thread it hit is a frontend's. Pure,
// async-signal-safe functions (no allocation, no lock).
#pragma once

#include <signal.h>

namespace manypy {

/// A SIGSEGV or SIGBUS the hardware raised (not a kill or raise) at an
/// address within 64 KiB of the stack pointer in `context` (a ucontext_t):
/// a call's push or a frame's first store just past the stack's guard page.
bool IsStackOverflow(int signal, const siginfo_t* info, const void* context);

/// Threads that read, decode and answer requests: the HTTP frontend's (named
/// manypy-http by it) and gRPC's own (its pollers, executors and callback
/// threads), by the thread name `name`.
bool IsFrontendThread(const char* name);

}  // namespace manypy
