#include "interpreters/interrupter.h"

namespace manypy {

Interrupter::Interrupter(shim::InterpreterShim* shim) : shim_(shim), thread_([this] { Run(); }) {}

Interrupter::~Interrupter() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Interrupter::Interrupt(uint64_t token) {
  {
    MutexLock lock(mu_);
    pending_.push_back(token);
  }
  cv_.notify_all();
}

void Interrupter::Run() {
  for (;;) {
    std::vector<uint64_t> tokens;
    {
      MutexLock lock(mu_);
      cv_.wait(lock.native(), [this]() REQUIRES(mu_) { return stop_ || !pending_.empty(); });
      if (stop_) return;
      tokens.swap(pending_);
    }
    // Waits for the GIL: the interpreted code gives it up within its switch
    // interval (5 ms) once another thread asks for it.
    int gil = shim_->AcquireGil();
    for (uint64_t token : tokens) shim_->Interrupt(token);
    shim_->ReleaseGil(gil);
  }
}

}  // namespace manypy
