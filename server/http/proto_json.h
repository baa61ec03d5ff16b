// ProtoToJson: a protocol message (metadata, config, statistics) as Triton's HTTP
// JSON: proto field names, 64-bit integers as numbers (not protobuf's strings),
// enums by name, unset messages and oneofs left out. Pure; thread-safe.
#pragma once

#include <string>

#include <google/protobuf/message.h>
#include <rapidjson/document.h>

#include "proto/grpc_service.pb.h"

namespace manypy {

/// `message` as a JSON object in `doc`'s allocator.
rapidjson::Value ProtoToJson(const google::protobuf::Message& message,
                             rapidjson::Document::AllocatorType& alloc);

/// A JSON document as compact text.
std::string JsonText(const rapidjson::Value& value);

/// A request parameter's JSON value as the protocol's InferParameter: a bool,
/// an integer (int64, else uint64), another number (double) or a string;
/// anything else as its JSON text.
void JsonToParameter(const rapidjson::Value& value, inference::InferParameter* parameter);
/// The reverse: a parameter as its JSON value (null when unset).
rapidjson::Value ParameterToJson(const inference::InferParameter& parameter,
                                 rapidjson::Document::AllocatorType& alloc);

}  // namespace manypy
