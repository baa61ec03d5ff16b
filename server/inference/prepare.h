// Prepare, the first stage, on the frontend's thread: validates and decodes a
// ModelInferRequest for one model into an InferenceRequest. Bad requests end
// here and never reach a queue. Pure function; thread-safe.
#pragma once

#include "proto/grpc_service.pb.h"
#include "server/inference/inference_request.h"
#include "package_format/manifest.h"

namespace manypy {

/// Fills `out`'s id, inputs (manifest order), batch rows, item shapes and
/// deadline (the earlier of `client_deadline` and `out->times.received` plus
/// the model's `default_timeout`, when non-zero). INVALID_ARGUMENT, naming the input or output and the model, for
/// anything the model cannot take: input names, count, datatypes, shapes,
/// batch size, contents, or an unknown requested output.
/// Inputs and requested outputs that name a system shared-memory region are
/// resolved in `regions` (null: refused; see DecodeInputs); so is a bad
/// region, offset or size of a requested output, before the model runs.
Status PrepareRequest(const inference::ModelInferRequest& wire, const Manifest& manifest,
                      std::chrono::microseconds default_timeout, Clock::time_point client_deadline,
                      const SharedMemoryRegions* regions, InferenceRequest* out);

}  // namespace manypy
