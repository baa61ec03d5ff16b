// The model a fuzzed inference request is decoded for, and the checks on what Prepare made
// of it. Shared by the gRPC and HTTP request targets. Pure functions; thread-safe.
#pragma once

#include "package_format/manifest.h"
#include "proto/grpc_service.pb.h"
#include "server/inference/inference_request.h"

namespace manypy::fuzz {

/// A valid manifest that fits `request` closely, so decoding gets past the name and
/// datatype checks and into the contents: one input per distinct request input name
/// (in reverse order), its datatype if known (else FP32), its shape with odd dimensions
/// made variable (-1); batching (max_batch_size 4) when the model name starts with 'b'.
/// One output, OUTPUT0.
Manifest ManifestForRequest(const inference::ModelInferRequest& request);

/// Aborts unless `prepared` (what PrepareRequest made of `request`) holds one value per
/// manifest input whose shape and element count are the request's.
void CheckPrepared(const inference::ModelInferRequest& request, const Manifest& manifest,
                   const InferenceRequest& prepared);

}  // namespace manypy::fuzz
