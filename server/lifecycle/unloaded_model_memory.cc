#include "server/lifecycle/unloaded_model_memory.h"

#include <cstddef>

namespace manypy {
namespace {

// Freed obmalloc arenas an interpreter keeps after a model's unload: none. The
// cache is there so that serving never munmaps (a TLB shootdown on every
// core); after an unload the next arena the requests need is mmapped again,
// and a reserve would only be resident memory beside the budget (make
// bench-many-models: 4 MiB per interpreter cost 8 MiB of its peak).
constexpr size_t kArenaReserveBytes = 0;

}  // namespace

void ReturnUnloadedModelMemory(InterpreterSession& session) {
  // A packaged model's modules, classes and functions form reference cycles
  // (function -> module globals -> function): only the cyclic collector frees them.
  session.Global("gc", "collect").Call();
  // CPython's method cache (4096 entries per interpreter) holds a reference
  // to the name of every attribute looked up on a type: names the model's
  // load made (its modules', its pickle's) outlive it there, a few hundred
  // small strings scattered through the arenas its objects filled, and
  // each one keeps its whole 1 MiB arena. Cleared, those arenas empty and
  // go (400 loads of 20 models in one interpreter left 6-7 arenas without
  // it, at most 1 with it); the cache refills on the next lookups.
  session.Global("sys", "_clear_type_cache").Call();
  // The memory the model's objects filled goes back to the system: an interpreter
  // would otherwise keep its Python heap's high-water mark, e.g. the tables
  // of every model that was ever loaded at once beside others (make
  // bench-many-models).
  session.ReturnFreeMemory(kArenaReserveBytes);
}

}  // namespace manypy
