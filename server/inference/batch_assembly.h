// Joins the inputs of a dynamic batch along dimension 0 and splits the
// model's outputs back into each request's rows. Pure functions; thread-safe.
#pragma once

#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "package_format/manifest.h"
#include "server/inference/scheduler.h"

namespace manypy {

/// The batch's inputs, each concatenated along dim 0 in request order
/// (tensors with at::cat, BYTES lists joined). A single request's inputs are
/// returned as they are (no copy).
std::vector<Value> JoinInputs(const std::vector<RequestPtr>& batch);

/// Splits `outputs` (manifest order) of one execution over `batch`: request
/// i gets rows [offset_i, offset_i + batch_rows_i) of every output, as views
/// for tensors. With one request the outputs are passed through. INTERNAL,
/// naming the model and the output, when an output's first dimension is not
/// the batch's row count.
Status SplitOutputs(const Manifest& manifest, const std::vector<RequestPtr>& batch,
                    std::vector<Value> outputs, std::vector<std::vector<Value>>* per_request);

}  // namespace manypy
