// Builds the inputs manypy-perf sends: random data shaped from the model's
// metadata, or raw files given with --input. Pure functions; thread-safe.
#pragma once

#include "clients/cpp/infer_input.h"
#include "clients/perf/perf_options.h"
#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy::perf {

/// One InferInput per model input. `batching`: the model's first dimension is
/// the batch one (ModelConfig max_batch_size > 0), sized to options.batch_size.
StatusOr<client::InferInputs> MakeInputs(const inference::ModelMetadataResponse& metadata,
                                         bool batching, const PerfOptions& options);

}  // namespace manypy::perf
