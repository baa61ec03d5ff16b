// The parts of the protocol's ModelMetadata response that come from one
// manifest alone: name, platform, its own version, inputs and outputs. The
// server adds the model's other versions (protocol_metadata.h); the fuzzers
// use this alone, so both answer from one rule. A pure function; thread-safe.
#pragma once

#include "package_format/manifest.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

void FillManifestMetadata(const Manifest& m, inference::ModelMetadataResponse* response);

}  // namespace manypy
