// How an execution or a queued request that did not run to its answer is
// worded to its client: interrupted (execution limit, client gone, deadline),
// expired in its queue, a sequence timed out. Pure functions; thread-safe.
#pragma once

#include <chrono>

#include "server/inference/execution.h"
#include "server/inference/scheduler.h"

namespace manypy {

/// Why the interrupted `execution` ended, for `request`: its client left
/// (CANCELLED), its deadline passed (DEADLINE_EXCEEDED), else its execution
/// limit. `no_one_waits`: the watchdog interrupted it because no client waited;
/// `ran`: how long it ran; `now`: when it ended.
Status InterruptedStatus(const Execution& execution, const InferenceRequest& request,
                         bool no_one_waits, std::chrono::microseconds ran, Clock::time_point now);

/// Why a request of `model` left its queue unrun at `now`: its client cancelled
/// (CANCELLED) or its deadline passed (DEADLINE_EXCEEDED).
Status ExpiredStatus(const DispatchedModel& model, const InferenceRequest& request, Clock::time_point now);

/// Logs that a sequence of `model` timed out and its state is dropped.
void LogSequenceTimedOut(const DispatchedModel& model, const Scheduler::ClosedSequence& closed);

}  // namespace manypy
