// Thread policy: how many intra-op threads libtorch gets so that interpreters
// x threads does not oversubscribe the cores. Pure functions; thread-safe.
#pragma once

#include <cstddef>

namespace manypy {

/// CPU cores this process may run on (sched affinity), at least 1.
size_t HardwareCores();

/// max(1, cpus / interpreters): each interpreter busy at once still leaves
/// one CPU per intra-op thread. `cpus` defaults to HardwareCores(); the server
/// passes its container's CPU limit.
int DefaultIntraOpThreads(size_t interpreters, size_t cpus = HardwareCores());

}  // namespace manypy
