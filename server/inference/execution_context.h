// ExecutionContext: the execution running on this thread (its model, its
// requests, its interpreter slot), for what a model's Python asks of the
// server while it runs: a nested inference (manypy.infer), its request's
// parameters and deadline (manypy.request). The Dispatcher sets it for the
// length of each call. Thread-local: only the worker running the call sees
// it; a nested call run on its caller's worker stacks on its caller's.
#pragma once

#include <vector>

#include "server/inference/dispatched_model.h"

namespace manypy {

struct ExecutionContext {
  const DispatchedModel* model = nullptr;
  const std::vector<RequestPtr>* requests = nullptr;
  size_t slot = 0;
  /// The latest client deadline of its requests (max(): none).
  Clock::time_point deadline = Clock::time_point::max();
  /// The execution this one runs inside (a nested call run on its caller's
  /// worker), or null.
  const ExecutionContext* outer = nullptr;
};

/// This thread's innermost execution, or null outside any.
const ExecutionContext* CurrentExecution();

/// Makes `context` this thread's current execution until destroyed.
class ScopedExecution {
 public:
  explicit ScopedExecution(ExecutionContext* context);
  ~ScopedExecution();
  ScopedExecution(const ScopedExecution&) = delete;
  ScopedExecution& operator=(const ScopedExecution&) = delete;

 private:
  const ExecutionContext* saved_;
};

}  // namespace manypy
