// Tensor values between JSON and the protocol's raw little-endian bytes, one
// datatype at a time (the table in common/datatype.h). Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "common/datatype.h"
#include "common/status.h"

namespace manypy {

/// Packs the leaves of `data` (nested arrays, or flat, in row-major order)
/// into `raw` (BYTES: each element a 4-byte length, then its bytes; from
/// JSON strings). `*count` is the number of leaves. INVALID_ARGUMENT, naming
/// `what` and the element, for a value of the wrong JSON type or out of range.
Status JsonToRaw(const std::string& what, const DatatypeInfo& dt, const rapidjson::Value& data,
                 std::string* raw, size_t* count);

/// Appends the elements of `raw` to the JSON array `out` (flat): BOOL as
/// true/false, integers and floats (FP16 / BF16 widened) as numbers, BYTES
/// as strings. INTERNAL when `raw` is not whole elements.
Status RawToJson(const DatatypeInfo& dt, const std::string& raw, rapidjson::Value* out,
                 rapidjson::Document::AllocatorType& alloc);

}  // namespace manypy
