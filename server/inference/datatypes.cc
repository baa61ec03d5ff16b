#include "server/inference/datatypes.h"

namespace manypy {

// A switch, not a table, so the compiler flags a Datatype added without a torch type.
bool TorchTypeFor(Datatype type, c10::ScalarType* out) {
  // clang-format off
  switch (type) {
    case Datatype::kBool: *out = c10::kBool; return true;
    case Datatype::kUint8: *out = c10::kByte; return true;
    case Datatype::kUint16: *out = c10::kInt; return true;   // widened: no uint16 in torch 1.13
    case Datatype::kUint32: *out = c10::kLong; return true;  // widened
    case Datatype::kUint64: *out = c10::kLong; return true;  // values above INT64_MAX are refused
    case Datatype::kInt8: *out = c10::kChar; return true;
    case Datatype::kInt16: *out = c10::kShort; return true;
    case Datatype::kInt32: *out = c10::kInt; return true;
    case Datatype::kInt64: *out = c10::kLong; return true;
    case Datatype::kFp16: *out = c10::kHalf; return true;
    case Datatype::kBf16: *out = c10::kBFloat16; return true;
    case Datatype::kFp32: *out = c10::kFloat; return true;
    case Datatype::kFp64: *out = c10::kDouble; return true;
    case Datatype::kBytes: return false;
  }
  // clang-format on
  return false;
}

bool TorchTypeFor(const std::string& datatype, c10::ScalarType* out) {
  const DatatypeInfo* info = FindDatatype(datatype);
  return info != nullptr && TorchTypeFor(info->type, out);
}

}  // namespace manypy
