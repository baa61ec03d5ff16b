// The watchdog's decisions: which running executions to interrupt at `now`
// (past their execution limit, or no client waits any more) and when to look
// again. Pure: no threads, no clock; the caller holds the dispatcher's mutex.
#pragma once

#include <chrono>
#include <set>
#include <vector>

#include "server/inference/execution.h"

namespace manypy {

struct WatchdogTimes {
  /// The longest the watchdog sleeps without a reason to wake.
  std::chrono::milliseconds period{100};
  /// A call still running after its interrupt is interrupted again this often
  /// (a model may catch the first one).
  std::chrono::milliseconds reinterrupt_interval{1000};
  /// How long a streaming model whose clients all left may compute before it
  /// is interrupted: at its next yield its stream closes the generator
  /// cleanly (GeneratorExit, its finally blocks run), which an interrupt would not.
  std::chrono::milliseconds stream_close_grace{100};
};

struct WatchdogLook {
  std::vector<ExecutionPtr> overdue;  ///< to interrupt now
  Clock::time_point wake;             ///< when to look again at the latest
};

/// Looks at every running execution at `now`: those past their interrupt time,
/// and those no client waits for any more (once a stream's grace is over),
/// are overdue, and their next interrupt is set `reinterrupt_interval` ahead.
/// Updates the executions' watchdog fields; answered ones are skipped.
WatchdogLook LookForOverdue(const std::set<ExecutionPtr>& running, Clock::time_point now,
                            const WatchdogTimes& times);

/// Whether no request in `execution` still has a client waiting at `now`:
/// each one's client has gone (cancelled, disconnected) or its deadline has passed.
bool NoOneWaits(const Execution& execution, Clock::time_point now);

}  // namespace manypy
