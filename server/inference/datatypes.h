// Open Inference Protocol datatypes <-> libtorch scalar types. Pure functions;
// thread-safe.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

namespace manypy {

/// The scalar type a tensor of `datatype` has inside the model. torch 1.13
/// has no uint16/32/64, so those arrive widened to the next signed type
/// (int32 / int64 / int64). BYTES has no scalar type (returns false).
bool TorchTypeFor(const std::string& datatype, c10::ScalarType* out);

/// Bytes per element on the wire; 0 for BYTES.
size_t WireElementSize(const std::string& datatype);

}  // namespace manypy
