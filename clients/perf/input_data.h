// Builds the inputs manypy-perf sends: random data shaped from the model's
// metadata, or raw files given with --input. Pure functions; thread-safe.
#pragma once

#include "clients/cpp/infer_input.h"
#include "clients/perf/perf_options.h"
#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy::perf {

/// One InferInput per model input, for each input set (InputSetCount: one
/// unless an --input is given several times). `batching`: the model's first
/// dimension is the batch one (ModelConfig max_batch_size > 0), sized to
/// options.batch_size.
StatusOr<std::vector<client::InferInputs>> MakeInputSets(
    const inference::ModelMetadataResponse& metadata, bool batching, const PerfOptions& options);

/// Which of `sets` input sets sender thread `worker` sends as its request
/// number `request` (from 0): (worker + request) mod sets, so that each thread
/// cycles through every set and the threads are spread over them at any time.
inline size_t InputSetFor(size_t worker, uint64_t request, size_t sets) {
  return static_cast<size_t>((worker + request) % sets);
}

}  // namespace manypy::perf
