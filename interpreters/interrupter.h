// Interrupter: raises _manypy.ExecutionInterrupted in code running in one
// interpreter, from a thread of its own, so that the caller never waits for
// that interpreter's GIL (native code may hold it for a long time).
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "interpreters/shim/shim_api.h"

namespace manypy {

class Interrupter {
 public:
  explicit Interrupter(shim::InterpreterShim* shim);
  /// Joins the thread. Blocks while it waits for a GIL that native code holds.
  ~Interrupter();

  /// Queues an interrupt of the scope `token` (InterpreterSession::
  /// BeginInterruptible); returns at once. A scope already closed is ignored.
  void Interrupt(uint64_t token);

 private:
  void Run();

  shim::InterpreterShim* const shim_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> pending_;  // guarded by mu_
  bool stop_ = false;              // guarded by mu_
  std::thread thread_;
};

}  // namespace manypy
