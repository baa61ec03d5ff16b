// HostServices: what an interpreter's Python may ask of the process that
// hosts it, by name. `_manypy.call_host(service, request)` in any interpreter
// runs the handler registered for `service` on the calling thread, with that
// interpreter's GIL released, and returns its answer (or raises
// _manypy.HostError(code, message)). The interpreter layer only carries the
// calls; what they mean is the server's (server/core/python_services.h).
// Thread-safe: handlers may be registered and called from any thread.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"
#include "interpreters/value.h"

namespace manypy {

/// Answers one request from interpreter `interpreter`'s Python.
using HostService = std::function<StatusOr<Value>(size_t interpreter, const Value& request)>;

/// Makes `service` answer with `handler` (replacing any earlier one). A
/// handler must be unregistered before what it uses goes away.
void RegisterHostService(const std::string& service, HostService handler);
void UnregisterHostService(const std::string& service);

/// Runs the handler of `service`; NOT_FOUND naming it when none is registered.
StatusOr<Value> CallHostService(const std::string& service, size_t interpreter, const Value& request);

}  // namespace manypy
