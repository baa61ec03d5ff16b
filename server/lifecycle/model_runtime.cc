#include "server/lifecycle/model_runtime.h"

#include <iterator>

#include "server/lifecycle/model_runtime_modules.h"

namespace manypy {

Obj DefineModelRuntime(InterpreterSession& session) {
  // In the generated order: each module's imports find the ones before it,
  // and the package, last, imports them all.
  constexpr size_t kCount = std::size(kModelRuntimeModules);
  for (size_t i = 0; i + 1 < kCount; ++i) {
    session.DefineModule(kModelRuntimeModules[i][0], kModelRuntimeModules[i][1]);
  }
  return session.DefineModule(kModelRuntimeModules[kCount - 1][0],
                              kModelRuntimeModules[kCount - 1][1]);
}

}  // namespace manypy
