// Builds the protocol's metadata, config, statistics and index responses
// from the model manager's state. Pure functions of their inputs; thread-safe.
#pragma once

#include <string>

#include "common/status.h"
#include "proto/grpc_service.pb.h"
#include "server/lifecycle/model_manager.h"

namespace manypy {

inline constexpr const char* kServerName = "manypy";

void FillServerMetadata(inference::ServerMetadataResponse* response);
/// From a loaded version's manifest or (on-demand mode) a not-loaded archive's.
void FillModelMetadata(const Manifest& m, const ModelManager& models,
                       inference::ModelMetadataResponse* response);
/// Enough of Triton's ModelConfig for its clients: name, platform, batching,
/// inputs/outputs, dynamic batching, one CPU instance group of the model's
/// instance count.
void FillModelConfig(const Manifest& m, const ModelSettings& settings,
                     inference::ModelConfigResponse* response);
void FillModelStatistics(const Model& model, inference::ModelStatistics* stats);
/// "8.3 MiB (weights 8.0 MiB once, Python 0.3 MiB over 2 interpreters)": a
/// READY version's reason in the index.
std::string DescribeMemory(const MemoryFootprint& memory);
void FillRepositoryIndex(const ModelManager& models, bool ready_only,
                         inference::RepositoryIndexResponse* response);

}  // namespace manypy
