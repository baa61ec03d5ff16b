// PrepareValueRequest: Prepare for a request that comes from a model's own
// Python (manypy.infer) rather than the wire: its inputs are already tensors
// (and nested lists of bytes for BYTES), handed over without a copy, and are
// checked against the callee's manifest exactly as a wire request's are.
// Pure function; thread-safe.
#pragma once

#include <chrono>

#include "package_format/manifest.h"
#include "server/inference/inference_request.h"

namespace manypy {

/// Fills `out`'s inputs (manifest order), batch rows and item shapes from
/// `inputs`, a dict of input name -> tensor (or nested list of bytes / str
/// for BYTES), and its deadlines (`client_deadline`, and the model's
/// `default_timeout` for the queue). INVALID_ARGUMENT naming the model and
/// the input for a missing or unknown input, a wrong datatype or shape.
Status PrepareValueRequest(const Value& inputs, const Manifest& manifest,
                           std::chrono::microseconds default_timeout,
                           Clock::time_point client_deadline, InferenceRequest* out);

}  // namespace manypy
