// Decodes the inputs of a ModelInferRequest (typed or raw contents) into the
// Values a model takes, checking them against the model's manifest. Pure
// function; thread-safe.
#pragma once

#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "package_format/manifest.h"
#include "proto/grpc_service.pb.h"
#include "server/inference/shared_memory_regions.h"
#include "server/inference/shared_memory_views.h"

namespace manypy {

/// The request's inputs as the model's positional arguments, in manifest
/// order. INVALID_ARGUMENT, naming the input and the model, for a wrong input
/// count or name, datatype, shape, batch size, byte size or element count.
///
/// An input may name a system shared-memory region instead of carrying its
/// bytes (raw_input_contents then holds one entry per other input, as in
/// Triton). It is looked up in `regions` (null: shared memory is refused)
/// and, where its datatype and alignment allow, becomes a tensor viewing the
/// region without a copy, remembered in `views` so that the request can let
/// go of it when it ends (see SharedMemoryViews).
Status DecodeInputs(const inference::ModelInferRequest& request, const Manifest& manifest,
                    const SharedMemoryRegions* regions, std::vector<Value>* arguments,
                    SharedMemoryViews* views);

}  // namespace manypy
