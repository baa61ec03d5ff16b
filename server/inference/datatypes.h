// The libtorch scalar type of each Open Inference Protocol datatype (the other
// datatype facts live in common/datatype.h). Pure functions; thread-safe.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

#include "common/datatype.h"

namespace manypy {

/// The scalar type a tensor of `type` has inside the model. torch 1.13 has no
/// uint16/32/64, so those arrive widened to the next signed type (int32 / int64 /
/// int64). BYTES has no scalar type (returns false).
bool TorchTypeFor(Datatype type, c10::ScalarType* out);

/// Whether `type` is one of those widened (UINT16/32/64): its wire bytes are
/// not the tensor's, so it is converted (with a range check on the way out).
inline bool WidenedInTorch(Datatype type) {
  return type == Datatype::kUint16 || type == Datatype::kUint32 || type == Datatype::kUint64;
}

/// The same by name; false for BYTES and for unknown names.
bool TorchTypeFor(const std::string& datatype, c10::ScalarType* out);

}  // namespace manypy
