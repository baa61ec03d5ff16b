#include "server/inference/execution_outcome.h"

#include <cstdio>

#include "server/log.h"

namespace manypy {

Status InterruptedStatus(const Execution& execution, const InferenceRequest& request,
                         bool no_one_waits, std::chrono::microseconds ran, Clock::time_point now) {
  const DispatchedModel& model = *execution.model;
  const std::string& name = model.manifest().name;
  if (!no_one_waits && model.manifest().streaming) {
    return DeadlineExceeded("model '" + name + "' took longer than its execution limit of " +
                            FormatSeconds(model.limits().max_execution) +
                            " s to yield its next response and was interrupted");
  }
  if (!no_one_waits) {
    return DeadlineExceeded("model '" + name + "' ran longer than its execution limit of " +
                            FormatSeconds(model.limits().max_execution) + " s and was " +
                            (execution.interruptible
                                 ? "interrupted"
                                 : "answered as failed when it ended (its calls cannot be "
                                   "interrupted)"));
  }
  // Queued requests that end so are answered alike (ExpiredStatus). A deadline
  // that passed comes first: gRPC also reports such a call as cancelled.
  if (now >= request.client_deadline || !request.ClientLeft()) {
    return DeadlineExceeded("the deadline of the request to model '" + name +
                            "' passed while it ran; the call was interrupted after " +
                            FormatSeconds(ran) + " s");
  }
  return Cancelled("the client left its request to model '" + name +
                   "' while it ran; the call was interrupted after " + FormatSeconds(ran) + " s");
}

Status ExpiredStatus(const DispatchedModel& model, const InferenceRequest& request, Clock::time_point now) {
  const std::string& name = model.manifest().name;
  // A deadline that passed comes first: gRPC also reports such a call as cancelled.
  if (now < request.deadline && request.ClientLeft()) {
    return Cancelled("the client cancelled its request to model '" + name + "' before it ran");
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - request.times.prepared);
  return DeadlineExceeded("the deadline of the request to model '" + name + "' passed after " +
                          std::to_string(waited.count()) + " ms in its queue; it was not run");
}

void LogSequenceTimedOut(const DispatchedModel& model, const Scheduler::ClosedSequence& c) {
  const Manifest& m = model.manifest();
  Log(LogLevel::kInfo, "model '" + m.name + "' version " + std::to_string(m.version) +
                           ": sequence " + c.key + " timed out after " +
                           FormatSeconds(c.idle) +
                           " s without a request (max_sequence_idle_microseconds " +
                           std::to_string(model.sequences().max_sequence_idle_microseconds) +
                           "); its state is dropped");
}

}  // namespace manypy
