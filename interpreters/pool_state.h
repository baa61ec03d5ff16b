// Internal: what the pool, its sessions and its replicated objects share.
// Constant after construction; the load balancer is itself thread-safe.
#pragma once

#include <memory>
#include <vector>

#include "interpreters/image_preparer.h"
#include "interpreters/interpreter.h"
#include "interpreters/interrupter.h"
#include "interpreters/load_balancer.h"

namespace manypy::detail {

struct PoolState {
  explicit PoolState(size_t n) : balancer(n) {}
  // Interpreters are finalized before the preparer they call into. The one
  // that made the process-global registrations is never finalized: the
  // dispatcher keeps Python kernels that live in it until the process exits.
  ~PoolState() {
    interrupters.clear();  // their threads use the interpreters' GILs
    while (!interpreters.empty()) {
      if (interpreters.back()->owns_registrations()) {
        // Never finalized, so CPython will not flush its buffered output.
        interpreters.back()->FlushOutput();
        interpreters.back().release();  // NOLINT: deliberately kept alive
        preparer.release();             // NOLINT: it may still import extensions
      }
      interpreters.pop_back();
    }
  }

  std::unique_ptr<ImagePreparer> preparer;
  std::vector<std::unique_ptr<Interpreter>> interpreters;
  LoadBalancer balancer;
  std::vector<std::unique_ptr<Interrupter>> interrupters;  // one per interpreter
};

}  // namespace manypy::detail
