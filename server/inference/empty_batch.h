// Empty batches: a request whose batch dimension is 0, answered from the
// model's signature when that fixes every output, so no model runs for it
// (docs/packaging.md#empty-batches). Pure function; thread-safe.
#pragma once

#include <vector>

#include "interpreters/value.h"
#include "package_format/manifest.h"

namespace manypy {

/// For a batching model (max_batch_size > 0) whose every output shape is
/// fixed (no -1): the outputs of a 0-row batch, in manifest order (tensors of
/// shape [0, dims...] and the output's datatype; an empty list for BYTES),
/// and true. False when some output has a variable dimension, which only the
/// model can tell: then the model is called with the 0-row inputs.
bool EmptyBatchOutputs(const Manifest& manifest, std::vector<Value>* outputs);

}  // namespace manypy
