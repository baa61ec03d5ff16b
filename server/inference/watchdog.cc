#include "server/inference/watchdog.h"

#include <algorithm>

namespace manypy {
namespace {

// For a streaming execution no one waits for: whether its grace period (to
// reach its next yield) is over at `now`, starting it if need be. True for any other.
bool StreamGraceOver(Execution& execution, Clock::time_point now, std::chrono::milliseconds grace) {
  if (!execution.streaming) return true;
  if (execution.no_one_waits_since == Clock::time_point::max()) execution.no_one_waits_since = now;
  return now - execution.no_one_waits_since >= grace;
}

}  // namespace

ExecutionPtr NewExecution(std::shared_ptr<DispatchedModel> model, std::vector<RequestPtr> requests) {
  auto execution = std::make_shared<Execution>();
  execution->interruptible = model->executable().interruptible();
  execution->streaming = model->manifest().streaming;
  execution->model = std::move(model);
  execution->requests = std::move(requests);
  for (const auto& r : execution->requests) {
    execution->deadline = std::max(execution->deadline, r->client_deadline);
  }
  return execution;
}

bool NoOneWaits(const Execution& execution, Clock::time_point now) {
  if (now >= execution.deadline) return true;
  for (const auto& r : execution.requests) {
    bool gone = now >= r->client_deadline || r->ClientLeft();
    if (!gone) return false;
  }
  return !execution.requests.empty();
}

WatchdogLook LookForOverdue(const std::set<ExecutionPtr>& running, Clock::time_point now,
                            const WatchdogTimes& times) {
  WatchdogLook look;
  look.wake = now + times.period;
  for (const auto& e : running) {
    if (e->answered) continue;
    // Whether the watchdog still looks out for this call's clients and deadlines.
    bool watch_clients = !e->no_one_waits && e->interruptible;
    if (now >= e->interrupt_at) {
      look.overdue.push_back(e);
      e->interrupt_at = now + times.reinterrupt_interval;
    } else if (watch_clients && NoOneWaits(*e, now) &&
               StreamGraceOver(*e, now, times.stream_close_grace)) {
      // Every client left or gave up at its deadline: free the interpreter
      // for requests that still have one, as the execution limit would, but
      // now. Fired again every reinterrupt_interval, as an overdue one: a
      // call that has not armed its hook yet, or that caught the exception,
      // still ends.
      e->no_one_waits = true;
      watch_clients = false;
      e->interrupt_at = now + times.reinterrupt_interval;
      look.overdue.push_back(e);
    }
    look.wake = std::min(look.wake, e->interrupt_at);
    if (watch_clients) look.wake = std::min(look.wake, e->deadline);
  }
  return look;
}

}  // namespace manypy
