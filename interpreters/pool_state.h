// Internal: what the pool, its sessions and its replicated objects share.
// Constant after construction; the load balancer is itself thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "interpreters/image_preparer.h"
#include "interpreters/interpreter.h"
#include "interpreters/load_balancer.h"

namespace manypy::detail {

struct PoolState {
  explicit PoolState(size_t n) : balancer(n) {}
  // Interpreters are finalized before the preparer they call into, the one
  // that made the global registrations last.
  ~PoolState() {
    while (!interpreters.empty()) interpreters.pop_back();
  }

  std::unique_ptr<ImagePreparer> preparer;
  std::vector<std::unique_ptr<Interpreter>> interpreters;
  LoadBalancer balancer;
};

}  // namespace manypy::detail
