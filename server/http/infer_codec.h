// The HTTP inference request and response of the KServe v2 JSON protocol with
// Triton's binary-data extension, to and from the protocol's messages that
// the shared request path takes and fills. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// A decoded HTTP inference request.
struct HttpInferRequest {
  /// Every input in raw_input_contents (JSON data packed per datatype, binary
  /// data as sent) but those in shared memory, which carry Triton's
  /// shared-memory parameters instead; requested outputs by name (and their
  /// shared-memory parameters), so outputs come back raw.
  inference::ModelInferRequest wire;
  /// Per wire.outputs(i): whether it goes back as binary data.
  std::vector<bool> binary_outputs;
  /// The request's `binary_data_output` (all outputs, and the default for
  /// those that do not say).
  bool binary_data_output = false;
  /// The request's `timeout` parameter (microseconds; Triton's), zero: none.
  int64_t timeout_us = 0;
};

/// Decodes `body`: all JSON, or, when `json_length` is given (the
/// Inference-Header-Content-Length header), that many bytes of JSON followed
/// by the binary data of the inputs whose parameters give `binary_data_size`,
/// in input order. INVALID_ARGUMENT for malformed JSON, wrong types, missing
/// fields and binary sizes that do not add up.
Status DecodeInferRequest(std::string_view body, std::optional<size_t> json_length,
                          const std::string& model, const std::string& version,
                          HttpInferRequest* out);

/// An encoded HTTP inference response: the JSON, then (when any output is
/// binary) the binary data, with `json_length` for Inference-Header-Content-Length.
struct HttpInferBody {
  std::string body;
  std::optional<size_t> json_length;
};

/// Encodes `response` (raw outputs, as the request path fills them).
StatusOr<HttpInferBody> EncodeInferResponse(const inference::ModelInferResponse& response,
                                            const HttpInferRequest& request);

}  // namespace manypy
