// Datatype: the one table of Open Inference Protocol datatype facts (name, wire size,
// model_config.proto enum, typed contents field). Constant data: thread-safe.
// Free of torch, protobuf and gRPC on purpose: the C++ client links it too.
#pragma once

#include <cstddef>
#include <string>

namespace manypy {

/// The protocol's tensor datatypes, in the order SCHEMA.md and error messages list them.
enum class Datatype {
  kBool,
  kUint8,
  kUint16,
  kUint32,
  kUint64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kFp16,
  kBf16,
  kFp32,
  kFp64,
  kBytes
};

/// The InferTensorContents field that carries a datatype's values when a request or
/// response uses typed contents instead of raw bytes.
enum class TypedField {
  kNone,    ///< FP16 / BF16: the protocol has no typed field, only raw bytes
  kBool,    ///< bool_contents
  kInt,     ///< int_contents (INT8, INT16, INT32)
  kInt64,   ///< int64_contents
  kUint,    ///< uint_contents (UINT8, UINT16, UINT32)
  kUint64,  ///< uint64_contents
  kFp32,    ///< fp32_contents
  kFp64,    ///< fp64_contents
  kBytes,   ///< bytes_contents
};

struct DatatypeInfo {
  Datatype type;
  const char* name;  ///< as on the wire and in manifests: "FP32", "BYTES", ...
  size_t wire_size;  ///< bytes per element, little-endian; 0 for BYTES (length-prefixed)
  int config_enum;   ///< model_config.proto DataType value (BYTES is TYPE_STRING)
  TypedField typed_field;
};

/// Indexed by Datatype (datatype.cc checks that at compile time). config_enum values
/// are those of proto/model_config.proto; tests/common/datatype_test.cc checks them.
inline constexpr DatatypeInfo kDatatypes[] = {
    {Datatype::kBool, "BOOL", 1, 1, TypedField::kBool},
    {Datatype::kUint8, "UINT8", 1, 2, TypedField::kUint},
    {Datatype::kUint16, "UINT16", 2, 3, TypedField::kUint},
    {Datatype::kUint32, "UINT32", 4, 4, TypedField::kUint},
    {Datatype::kUint64, "UINT64", 8, 5, TypedField::kUint64},
    {Datatype::kInt8, "INT8", 1, 6, TypedField::kInt},
    {Datatype::kInt16, "INT16", 2, 7, TypedField::kInt},
    {Datatype::kInt32, "INT32", 4, 8, TypedField::kInt},
    {Datatype::kInt64, "INT64", 8, 9, TypedField::kInt64},
    {Datatype::kFp16, "FP16", 2, 10, TypedField::kNone},
    {Datatype::kBf16, "BF16", 2, 14, TypedField::kNone},
    {Datatype::kFp32, "FP32", 4, 11, TypedField::kFp32},
    {Datatype::kFp64, "FP64", 8, 12, TypedField::kFp64},
    {Datatype::kBytes, "BYTES", 0, 13, TypedField::kBytes},
};

/// The facts of `type`.
constexpr const DatatypeInfo& InfoOf(Datatype type) {
  return kDatatypes[static_cast<size_t>(type)];
}

/// The entry named `name` (case-sensitive, as the protocol is); nullptr for an unknown name.
const DatatypeInfo* FindDatatype(const std::string& name);

/// Every name, comma-separated in table order ("BOOL, UINT8, ..., BYTES"), for error messages.
const std::string& DatatypeNames();

}  // namespace manypy
