// Encodes a model's outputs into a ModelInferResponse (raw or typed
// contents), checking them against the model's manifest. Pure function;
// thread-safe.
#pragma once

#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "package_format/manifest.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// Fills the response's outputs from the model's outputs (manifest order):
/// the requested subset in the requested order (all, in manifest order, when
/// none is requested); raw contents unless every requested output asks for
/// `binary_data: false`. INVALID_ARGUMENT for an unknown requested output;
/// INTERNAL, naming the output, when the model returned something that does
/// not match its manifest.
Status EncodeOutputs(const std::vector<Value>& outputs, const Manifest& manifest,
                     const inference::ModelInferRequest& request,
                     inference::ModelInferResponse* response);

}  // namespace manypy
