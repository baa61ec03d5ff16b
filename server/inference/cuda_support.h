// Whether the libtorch this server runs on was built with CUDA and sees a
// device: the core asks, without including torch, to word its refusals.
// Thread-safe.
#pragma once

namespace manypy {

bool LibtorchHasCuda();

}  // namespace manypy
