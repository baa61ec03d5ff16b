// StreamStep: what one step of a continuously batched streaming model did for
// one of its requests (a response or none, finished or not, failed or not).
// Plain data, owned by the worker that ran the step.
#pragma once

#include <vector>

#include "common/status.h"
#include "interpreters/value.h"

namespace manypy {

struct StreamStep {
  /// Whether `outputs` hold a response (manifest order) for the client.
  bool responded = false;
  std::vector<Value> outputs;
  /// The request's stream ends after this step (after its response, if any).
  bool finished = false;
  /// Not OK: the step failed this request alone (an exception naming its
  /// state, or its response broke the manifest); it leaves with this status.
  Status error;
};

}  // namespace manypy
