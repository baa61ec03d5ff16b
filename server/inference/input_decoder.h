// Decodes the inputs of a ModelInferRequest (typed or raw contents) into the
// Values a model takes, checking them against the model's manifest. Pure
// function; thread-safe.
#pragma once

#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "package_format/manifest.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// The request's inputs as the model's positional arguments, in manifest
/// order. INVALID_ARGUMENT, naming the input and the model, for a wrong input
/// count or name, datatype, shape, batch size, byte size or element count.
Status DecodeInputs(const inference::ModelInferRequest& request, const Manifest& manifest,
                    std::vector<Value>* arguments);

}  // namespace manypy
