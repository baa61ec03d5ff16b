// The serving process's stop signals: SIGTERM and SIGINT drain the server,
// the supervisor's kStepAsideSignal steps it aside, and a backstop ends the
// process if either hangs. For main's thread only.
#pragma once

#include <chrono>

#include "server/server.h"

namespace manypy {

/// Blocks SIGTERM, SIGINT and kStepAsideSignal in the calling thread. Call
/// before the server starts its threads: they inherit the mask, so only
/// ServeUntilSignal's sigwait (or StartupStop's watcher) takes the signals.
void BlockStopSignals();

/// Waits for a stop signal, then drains `server` (SIGTERM, SIGINT) or steps
/// it aside (kStepAsideSignal) within `grace` and waits for it to stop.
/// Returns 0, main's exit status, when every call finished; when calls were
/// abandoned, or when shutdown hangs past `grace` + 4 s, exits the process
/// with status 1 without destroying the server (its interpreters are busy).
int ServeUntilSignal(Server& server, std::chrono::seconds grace);

}  // namespace manypy
