// The generate extension's JSON (Triton's /generate and /generate_stream):
// a request's fields other than "id" and "parameters" are the model's inputs
// by name, each a JSON value (a string, number or boolean, or nested arrays
// of them); a response's fields are the model's outputs by name, a
// one-element output as its element and any other as a flat array, next to
// model_name, model_version and id. Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "proto/grpc_service.pb.h"

namespace manypy {

/// Builds the protocol request for `model` (`version`) from a generate
/// `body`, using `metadata` (the model's inputs) to type each field: a value's
/// shape is its nesting, with leading dimensions of 1 added up to the input's
/// rank (so "hello" fills a BYTES input of shape [1], and [1, 2] one of
/// [-1, -1] as [1, 2]). "parameters" become the request's parameters (a
/// "timeout" in microseconds goes to `*timeout_us`). INVALID_ARGUMENT, naming
/// the field, for malformed JSON, a field that is no input, or a value that
/// does not fit its input's datatype.
Status DecodeGenerateRequest(std::string_view body, const inference::ModelMetadataResponse& metadata,
                             const std::string& version, inference::ModelInferRequest* wire,
                             int64_t* timeout_us);

/// One generate response's JSON object for `response` (raw outputs, as the
/// request path fills them). INTERNAL when an output's bytes are not whole elements.
StatusOr<std::string> EncodeGenerateResponse(const inference::ModelInferResponse& response);

}  // namespace manypy
