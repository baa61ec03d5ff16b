#include "interpreters/thread_policy.h"

#include <sched.h>

#include <algorithm>
#include <thread>

namespace manypy {

size_t HardwareCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    return std::max(1, CPU_COUNT(&set));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

int DefaultIntraOpThreads(size_t interpreters, size_t cpus) {
  return static_cast<int>(std::max<size_t>(1, cpus / std::max<size_t>(1, interpreters)));
}

}  // namespace manypy
