// Converts Open Inference Protocol tensors (proto messages) to and from the
// Values a model takes and returns, checking them against the model's
// manifest. Pure functions; thread-safe.
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
