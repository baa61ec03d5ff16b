// InferInput: one named input tensor (datatype, shape, little-endian raw
// bytes) plus builders from typed vectors and strings. A plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common/datatype.h"

namespace manypy::client {

/// The Open Inference Protocol datatype string of a C++ element type.
template <typename T>
constexpr const char* DatatypeOf() {
  if constexpr (std::is_same_v<T, bool>) return InfoOf(Datatype::kBool).name;
  else if constexpr (std::is_same_v<T, uint8_t>) return InfoOf(Datatype::kUint8).name;
  else if constexpr (std::is_same_v<T, uint16_t>) return InfoOf(Datatype::kUint16).name;
  else if constexpr (std::is_same_v<T, uint32_t>) return InfoOf(Datatype::kUint32).name;
  else if constexpr (std::is_same_v<T, uint64_t>) return InfoOf(Datatype::kUint64).name;
  else if constexpr (std::is_same_v<T, int8_t>) return InfoOf(Datatype::kInt8).name;
  else if constexpr (std::is_same_v<T, int16_t>) return InfoOf(Datatype::kInt16).name;
  else if constexpr (std::is_same_v<T, int32_t>) return InfoOf(Datatype::kInt32).name;
  else if constexpr (std::is_same_v<T, int64_t>) return InfoOf(Datatype::kInt64).name;
  else if constexpr (std::is_same_v<T, float>) return InfoOf(Datatype::kFp32).name;
  else if constexpr (std::is_same_v<T, double>) return InfoOf(Datatype::kFp64).name;
  else static_assert(sizeof(T) == 0, "no Open Inference Protocol datatype for this type");
}

/// Bytes per element of `datatype` on the wire; 0 for BYTES or an unknown name.
size_t ElementSize(const std::string& datatype);

/// Number of elements a shape describes (1 for a scalar shape []).
int64_t ElementCount(const std::vector<int64_t>& shape);

/// BYTES encoding: each element as a 4-byte little-endian length, then its bytes.
std::string EncodeBytesElements(const std::vector<std::string>& elements);
/// The inverse; false if `raw` is not a well-formed sequence of length-prefixed elements.
bool DecodeBytesElements(const std::string& raw, std::vector<std::string>* out);

/// One input tensor of a request. `raw` holds the elements densely packed in
/// row-major order, little-endian (BYTES: length-prefixed, see above).
struct InferInput {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  std::string raw;

  /// From typed values; `shape` defaults to [values.size()].
  template <typename T>
  static InferInput FromVector(std::string name, const std::vector<T>& values,
                               std::vector<int64_t> shape = {}) {
    InferInput in{std::move(name), DatatypeOf<T>(), std::move(shape), {}};
    if (in.shape.empty()) in.shape = {static_cast<int64_t>(values.size())};
    if constexpr (std::is_same_v<T, bool>) {
      for (bool v : values) in.raw.push_back(v ? 1 : 0);
    } else {
      in.raw.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
    }
    return in;
  }

  /// A BYTES tensor; `shape` defaults to [values.size()].
  static InferInput FromStrings(std::string name, const std::vector<std::string>& values,
                                std::vector<int64_t> shape = {});

  /// Raw bytes as they are (e.g. read from a file) for a tensor of `datatype`.
  static InferInput FromRaw(std::string name, std::string datatype, std::vector<int64_t> shape,
                            std::string raw);
};

using InferInputs = std::vector<InferInput>;

}  // namespace manypy::client
