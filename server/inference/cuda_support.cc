#include "server/inference/cuda_support.h"

#include <ATen/Context.h>

namespace manypy {

bool LibtorchHasCuda() { return at::hasCUDA(); }

}  // namespace manypy
