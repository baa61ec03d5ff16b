// Dispatcher's run to completion: a request whose call would start at once on
// an idle interpreter runs on the thread that submitted it (a frontend's),
// saving the hand-off to a worker and back. The rules are SubmitOrRunHere's
// (dispatcher.h); the execution itself is Execute's, as for any other.
#include <utility>

#include "server/inference/dispatcher.h"

namespace manypy {

RequestPtr Dispatcher::SubmitOrRunHere(const std::shared_ptr<DispatchedModel>& model,
                                       RequestPtr request) {
  {
    MutexLock lock(mu_);
    std::optional<size_t> slot = SlotToRunHere(*model, *request, Clock::now());
    if (slot.has_value()) {
      // Lent before mu_ is let go in Execute: its worker, should anything wake
      // it meanwhile, starts nothing there until the slot is returned.
      slots_.Lend(*slot);
      std::vector<RequestPtr> one;
      one.push_back(std::move(request));
      Execute(*slot, NewExecution(model, std::move(one)));
      slots_.Return(*slot);
      // While it ran, requests may have queued for other models and woken
      // this slot's worker, which passed the wake-up on and waits for its
      // slot (Return woke it); no worker slept through queued work.
      return nullptr;
    }
  }
  return Submit(model, std::move(request));
}

std::optional<size_t> Dispatcher::SlotToRunHere(const DispatchedModel& model,
                                                const InferenceRequest& request,
                                                Clock::time_point now) const {
  if (draining_ || model.left_ || options_.run_here_below.count() <= 0) return std::nullopt;
  // Streams keep their own pacing (the reader's window) and sequences their
  // interpreter: both stay with the workers.
  if (model.manifest().streaming || model.scheduler_->pins_slots()) return std::nullopt;
  if (model.recent_execution_ >= options_.run_here_below) return std::nullopt;
  if (model.running_ >= model.limits().instance_count) return std::nullopt;
  if (!model.scheduler_->StartsAloneAtOnce(model.running_ == 0)) return std::nullopt;
  // Expired or cancelled: its queue answers it as such.
  if (request.deadline <= now || request.ClientLeft()) return std::nullopt;
  // Fairness: a request queued for any model that could start now is served
  // first (its worker may have been woken and not yet run).
  for (const auto& m : models_) {
    if (m->scheduler_->queued() > 0 && m->running_ < m->limits().instance_count) {
      return std::nullopt;
    }
  }
  // Any slot whose worker waits for work (from the last: a fixed order
  // keeps one interpreter's caches warm for these calls at low load).
  for (size_t n = slots_.size(); n-- > 0;) {
    if (slots_.Idle(n)) return n;
  }
  return std::nullopt;
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
