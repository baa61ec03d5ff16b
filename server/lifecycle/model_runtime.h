// The model runtime (package_format/python/manypy_model_runtime, embedded at
// build time) as module manypy_model_runtime of an interpreter. The caller
// holds the interpreter's session; safe wherever the session is.
#pragma once

#include "interpreters/session.h"

namespace manypy {

/// The runtime's package module in `session`'s interpreter, its modules and
/// then the package defined from the embedded text the first time.
Obj DefineModelRuntime(InterpreterSession& session);

}  // namespace manypy
