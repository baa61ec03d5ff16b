// Dispatcher's run to completion: while an interpreter is idle, the thread
// that submitted a request (a frontend's) runs it there itself, and what is
// queued behind it for a while, saving the hand-off to a worker and back. The
// rules are SubmitOrRunHere's (dispatcher.h); each execution is Execute's.
#include <utility>

#include "server/inference/dispatcher.h"

namespace manypy {

bool Dispatcher::RunsHere(const DispatchedModel& model) const {
  // Streams keep their own pacing (the reader's window) and sequences their
  // interpreter: both stay with the workers; so does a model whose calls
  // lately took long (or that has not run yet).
  return options_.run_here_below.count() > 0 && !model.manifest().streaming &&
         !model.scheduler_->pins_slots() && model.recent_execution_ < options_.run_here_below;
}

std::optional<size_t> Dispatcher::SlotToRunHere(const DispatchedModel& model) const {
  if (draining_ || !RunsHere(model)) return std::nullopt;
  if (options_.run_here_quiet.count() > 0) {
    // Only into a quiet dispatcher: nothing running, nothing queued but the
    // request just queued, and no execution ended just now (Options).
    if (!running_.empty() || QueuedMoreThan(1)) return std::nullopt;
    if (Clock::now() - last_end_ < options_.run_here_quiet) return std::nullopt;
  }
  // Any slot whose worker waits for work (from the last: a fixed order
  // keeps one interpreter's caches warm for these calls at low load).
  for (size_t n = slots_.size(); n-- > 0;) {
    if (slots_.Idle(n)) return n;
  }
  return std::nullopt;
}

void Dispatcher::RunHere(size_t slot) {
  // Lent before mu_ is let go in Execute: its worker, should anything wake
  // it meanwhile, starts nothing there until the slot is returned.
  slots_.Lend(slot);
  // One execution: what FindWork hands this slot, as it would the slot's
  // worker (the schedulers form batches, the models take turns, expired
  // requests are answered), so the request just queued runs here unless
  // older work comes first, and nothing runs here when the next model in
  // turn is one only a worker runs. Only one: a longer turn (runs of what
  // queued meanwhile) holds back the replies already written, since gRPC
  // flushes a callback thread's writes when its callback returns, and runs
  // on one thread what the workers would run on every core.
  for (;;) {
    Clock::time_point ignored = Clock::time_point::max();  // a worker keeps the batchers' time
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> expired;
    ExecutionPtr execution = FindWork(slot, Clock::now(), &ignored, &expired, /*lent=*/true);
    if (!expired.empty()) {
      mu_.Unlock();
      for (auto& [model, r] : expired) Expire(*model, std::move(r));
      mu_.Lock();
      for (auto& [model, r] : expired) LeaveIfDrained(model);
      if (execution == nullptr) continue;
    }
    if (execution != nullptr) Execute(slot, execution);
    break;
  }
  slots_.Return(slot);
  // Work left queued (for a worker's model, or gathering a batch on its
  // delay, or queued meanwhile): a waiting worker takes it on, as after any
  // execution. One woken while the slot was lent waits on the slot (Return
  // woke it).
  if (QueuedMoreThan(0) && slots_.AnyIdle()) work_cv_.notify_one();
}

bool Dispatcher::TEST_SlotIdle(size_t slot) const {
  MutexLock lock(mu_);
  return slots_.Idle(slot);
}

void Dispatcher::NoteExecutionTime(DispatchedModel& model, Clock::duration took) {
  Clock::duration& recent = model.recent_execution_;
  // Up at once (one slow call stops calls here until the model is fast
  // again), down slowly: an eighth of the way per call.
  if (recent == Clock::duration::max() || took >= recent) {
    recent = took;
  } else {
    recent -= (recent - took) / 8;
  }
}

}  // namespace manypy
