// Interrupter: raises _manypy.ExecutionInterrupted in one interpreter's code
// from a thread of its own, so callers never wait for that interpreter's GIL.
// Thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/mutex.h"
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
  Mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> pending_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace manypy
