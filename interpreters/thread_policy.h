// Thread policy: how many intra-op threads libtorch gets so that interpreters
// x threads does not oversubscribe the cores. Pure functions; thread-safe.
#pragma once

#include <cstddef>

namespace manypy {

/// CPU cores this process may run on (sched affinity), at least 1.
size_t HardwareCores();

/// max(1, cores / interpreters): each interpreter busy at once still leaves
/// one core per intra-op thread.
int DefaultIntraOpThreads(size_t interpreters);

}  // namespace manypy
