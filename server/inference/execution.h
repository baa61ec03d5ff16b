// Execution: one model call a dispatcher worker runs (a batch of requests, or
// a nested call's one) and what the watchdog keeps of it. Plain data; the
// fields marked so are guarded by the owning Dispatcher's mutex.
#pragma once

#include <memory>
#include <vector>

#include "server/inference/dispatched_model.h"

namespace manypy {

struct Execution {
  std::shared_ptr<DispatchedModel> model;
  std::vector<RequestPtr> requests;
  InterruptHook hook;
  Clock::time_point started;
  /// The latest client deadline of its requests: past it, no one waits for the answer.
  Clock::time_point deadline = Clock::time_point::min();
  /// Constant: whether its model's calls can be interrupted (only then does
  /// the watchdog look out for its clients), and whether it streams.
  bool interruptible = true;
  bool streaming = false;
  Clock::time_point interrupt_at = Clock::time_point::max();  // guarded by the dispatcher's mu_
  bool answered = false;  // guarded by mu_: by the worker, or by Abandon
  /// Guarded by mu_: interrupted because every request's client left or its
  /// deadline passed (not for its execution limit).
  bool no_one_waits = false;
  /// Guarded by mu_: when the watchdog first saw no one waiting for a
  /// streaming execution (max: not yet). Its generator gets a grace period
  /// to reach its next yield, where it is closed (GeneratorExit), before
  /// the watchdog interrupts it.
  Clock::time_point no_one_waits_since = Clock::time_point::max();
};
using ExecutionPtr = std::shared_ptr<Execution>;

/// An execution of `model` for `requests`, its deadline and flags filled in.
ExecutionPtr NewExecution(std::shared_ptr<DispatchedModel> model, std::vector<RequestPtr> requests);

}  // namespace manypy
