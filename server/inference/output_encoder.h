// Encodes a model's outputs into a ModelInferResponse (raw or typed
// contents), checking them against the model's manifest. Pure function;
// thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "package_format/manifest.h"
#include "proto/grpc_service.pb.h"
#include "server/inference/shared_memory_regions.h"

namespace manypy {

/// Fills the response's outputs from the model's outputs (manifest order):
/// the requested subset in the requested order (all, in manifest order, when
/// none is requested); raw contents unless every requested output asks for
/// `binary_data: false`. INVALID_ARGUMENT for an unknown requested output;
/// INTERNAL, naming the output, when the model returned something that does
/// not match its manifest.
///
/// An output in `regions` (by name; null: none) is written into its
/// client's shared-memory region instead: the response lists its name,
/// datatype, shape and parameters (region, bytes written, offset) with no
/// contents (an empty raw entry, as Triton's). INVALID_ARGUMENT, naming the
/// output and the region, when the region is too small for it.
Status EncodeOutputs(const std::vector<Value>& outputs, const Manifest& manifest,
                     const inference::ModelInferRequest& request,
                     const std::map<std::string, SharedMemoryRef>* regions,
                     inference::ModelInferResponse* response);

}  // namespace manypy
