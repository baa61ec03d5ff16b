// StreamStep: what one step of a continuously batched streaming model did for
// one of its requests (a response or none, finished or not, failed or not),
// and Prefilled, what a prefill apart from the running batch made. Plain
// data, owned by the worker that ran the step.
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

/// A request prefilled apart from the running batch (Executable::
/// PrefillBatchedStream): its first response and the state the batch adopts.
struct Prefilled {
  StreamStep first;  ///< its error is unused: a failed prefill is an error status
  Value state;       ///< portable (Value: crosses interpreters); none once finished
};

}  // namespace manypy
