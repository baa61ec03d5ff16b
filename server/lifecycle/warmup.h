// Warm-up: runs a freshly loaded model on every interpreter before it is
// reported READY, so the first requests do not pay for lazy initialisation.
// Pure functions of their arguments; thread-safe.
#pragma once

#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "package_format/manifest.h"
#include "server/inference/executable.h"

namespace manypy {

/// Inputs made from the signature: zeros of each input's datatype and shape
/// (variable dimensions 1, the batch dimension `batch`), BYTES as b"manypy".
std::vector<Value> SignatureInputs(const Manifest& manifest, int64_t batch = 1);

/// Runs `runs` calls with SignatureInputs on interpreter `slot`, and for a
/// compiled model (Executable::compiled) with batching one more with a batch
/// of 2. INTERNAL naming the model and the failure.
Status WarmUp(Executable& model, const Manifest& manifest, size_t slot, int64_t runs);

}  // namespace manypy
