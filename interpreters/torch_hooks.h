// Process-wide overrides of libtorch registration entry points that let each
// interpreter load its own copy of libtorch_python (PyTorch 2.x). Thread-safe;
// libtorch calls them from static initializers, under the dynamic loader's lock.
#pragma once

#include "common/status.h"

namespace manypy {

struct TorchHookCounts {
  int skipped_definitions = 0;  ///< duplicate Dispatcher::registerDef from a libtorch_python copy
  int skipped_handlers = 0;     ///< duplicate c10d control-plane handler from a copy
};

/// What the overrides have skipped so far (both 0 on PyTorch 1.x, which needs none).
TorchHookCounts TorchHooks();

/// Ok when this libtorch needs no override, or when the program's overrides
/// are the definitions libtorch binds to (the program exports them: it links
/// manypy_interpreters, whose link options export them); else an error naming
/// the symbol a copy of libtorch_python would crash the process on.
Status CheckTorchHooksActive();

}  // namespace manypy
