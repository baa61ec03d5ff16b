// PyTorch >= 2.9: gives this interpreter's libtorch_python copy a
// per-interpreter cache of operators' Python objects (torch_api_function.cc).
// Not thread-safe: called once, before this interpreter's Python starts.
#pragma once

#include <string>

namespace manypy::shim {

/// Rewrites this copy's torch::detail::getTorchApiFunction to use this
/// interpreter's own cache. False, with the reason in `error`, when it cannot.
bool RouteTorchApiFunction(std::string* error);

}  // namespace manypy::shim
