// Conversion between raw little-endian tensor bytes and the protocol's typed
// InferTensorContents fields. Pure functions; thread-safe.
#pragma once

#include <string>

#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy::client {

/// Fills the typed field of `contents` that matches `datatype` from `raw`.
/// InvalidArgument for FP16 / BF16 (no typed field) and for malformed data.
Status RawToContents(const std::string& datatype, const std::string& raw,
                     inference::InferTensorContents* contents);

/// The raw little-endian bytes of the typed field of `contents` matching `datatype`.
StatusOr<std::string> ContentsToRaw(const std::string& datatype,
                                    const inference::InferTensorContents& contents);

}  // namespace manypy::client
