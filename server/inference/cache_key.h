// The response cache's key for one prepared request: a SHA-256 over what
// decides its answer: the model's name and version, each input's name,
// datatype, shape and bytes (as decoded, wherever they came from: raw
// contents, typed contents or shared memory), the requested outputs with
// their parameters, and the request's parameters (in name order). A
// collision-resistant digest, so that an equal key means an equal request.
// Pure function; thread-safe.
#pragma once

#include "proto/grpc_service.pb.h"
#include "server/inference/inference_request.h"
#include "server/inference/response_cache.h"
#include "package_format/manifest.h"

namespace manypy {

/// The key of `request` (prepared from `wire` for `manifest`) in the
/// entries of `owner`, the loaded version that would answer it.
CacheKey ResponseCacheKey(uint64_t owner, const Manifest& manifest, const InferenceRequest& request,
                          const inference::ModelInferRequest& wire);

}  // namespace manypy
