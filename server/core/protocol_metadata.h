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
void FillModelMetadata(const Model& model, const ModelManager& models,
                       inference::ModelMetadataResponse* response);
/// Enough of Triton's ModelConfig for its clients: name, platform, batching,
/// inputs/outputs, dynamic batching, one CPU instance group of the model's
/// instance count.
void FillModelConfig(const Model& model, inference::ModelConfigResponse* response);
void FillModelStatistics(const Model& model, inference::ModelStatistics* stats);
void FillRepositoryIndex(const ModelManager& models, bool ready_only,
                         inference::RepositoryIndexResponse* response);

}  // namespace manypy
