// Gives back what a model's objects held in an interpreter once the model is
// dropped there: its reference cycles, the names CPython's method cache keeps
// for it, and the emptied arenas. The caller holds that interpreter's session.
#pragma once

#include "interpreters/session.h"

namespace manypy {

/// Collects `session`'s interpreter's garbage and returns its free Python
/// memory to the system. Raises (PythonError) as any Python work does; an
/// unload may ignore that, since collecting only returns memory sooner.
void ReturnUnloadedModelMemory(InterpreterSession& session);

}  // namespace manypy
