#include "server/http/infer_codec.h"

#include <algorithm>

#include <rapidjson/document.h>

#include "common/datatype.h"
#include "server/http/json_body.h"
#include "server/http/proto_json.h"
#include "server/http/tensor_json.h"

namespace manypy {
namespace {

using rapidjson::Value;

// A member of an object, checked for its JSON type; nullptr when absent.
StatusOr<const Value*> Member(const Value& object, const char* name, const std::string& where,
                              rapidjson::Type type, const char* type_name) {
  auto it = object.FindMember(name);
  if (it == object.MemberEnd()) return static_cast<const Value*>(nullptr);
  bool ok = it->value.GetType() == type ||
            (type == rapidjson::kTrueType && it->value.IsBool()) ||
            (type == rapidjson::kNumberType && it->value.IsNumber());
  if (!ok) return InvalidArgument(where + ": '" + name + "' must be " + type_name);
  return &it->value;
}

#define MANYPY_ASSIGN_MEMBER(var, ...)              \
  auto var##_or = Member(__VA_ARGS__);              \
  if (!var##_or.ok()) return var##_or.status();     \
  const Value* var = *var##_or

// A `parameters` member's integer `key` (absent: nullopt).
StatusOr<std::optional<int64_t>> IntParameter(const Value* params, const char* key,
                                              const std::string& where) {
  if (params == nullptr) return std::optional<int64_t>();
  auto it = params->FindMember(key);
  if (it == params->MemberEnd()) return std::optional<int64_t>();
  if (!it->value.IsInt64() || it->value.GetInt64() < 0) {
    return InvalidArgument(where + ": parameter '" + key + "' must be a non-negative integer");
  }
  return std::optional<int64_t>(it->value.GetInt64());
}

StatusOr<bool> BoolParameter(const Value* params, const char* key, bool fallback,
                             const std::string& where) {
  if (params == nullptr) return fallback;
  auto it = params->FindMember(key);
  if (it == params->MemberEnd()) return fallback;
  if (!it->value.IsBool()) return InvalidArgument(where + ": parameter '" + key + "' must be true or false");
  return it->value.GetBool();
}

// Triton's shared-memory parameters of an input or requested output, copied
// onto the wire as they are (the core checks their types and ranges, as for
// gRPC). True when `params` names any.
bool CopySharedMemoryParameters(const Value* params,
                                google::protobuf::Map<std::string, inference::InferParameter>* wire) {
  if (params == nullptr) return false;
  bool any = false;
  for (const char* key : {"shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"}) {
    auto it = params->FindMember(key);
    if (it == params->MemberEnd()) continue;
    any = true;
    JsonToParameter(it->value, &(*wire)[key]);
  }
  return any;
}

Status DecodeInput(const Value& in, int index, std::string_view binary, size_t* binary_used,
                   inference::ModelInferRequest* wire) {
  std::string where = "inputs[" + std::to_string(index) + "]";
  if (!in.IsObject()) return InvalidArgument(where + " must be an object");
  MANYPY_ASSIGN_MEMBER(name, in, "name", where, rapidjson::kStringType, "a string");
  if (name == nullptr) return InvalidArgument(where + " has no 'name'");
  std::string what = "input '" + std::string(name->GetString(), name->GetStringLength()) + "'";
  MANYPY_ASSIGN_MEMBER(datatype, in, "datatype", what, rapidjson::kStringType, "a string");
  MANYPY_ASSIGN_MEMBER(shape, in, "shape", what, rapidjson::kArrayType, "an array of integers");
  if (datatype == nullptr || shape == nullptr) return InvalidArgument(what + " needs 'shape' and 'datatype'");
  MANYPY_ASSIGN_MEMBER(params, in, "parameters", what, rapidjson::kObjectType, "an object");
  auto* t = wire->add_inputs();
  t->set_name(name->GetString(), name->GetStringLength());
  t->set_datatype(datatype->GetString(), datatype->GetStringLength());
  int64_t numel = 1;
  for (const auto& d : shape->GetArray()) {
    if (!d.IsInt64()) return InvalidArgument(what + ": 'shape' must be an array of integers");
    t->add_shape(d.GetInt64());
    // -1: no count to check here (a negative or overflowing shape, which Prepare refuses).
    if (d.GetInt64() < 0 || (d.GetInt64() > 0 && numel > INT64_MAX / d.GetInt64())) numel = -1;
    else if (numel >= 0) numel *= d.GetInt64();
  }
  auto size = IntParameter(params, "binary_data_size", what);
  if (!size.ok()) return size.status();
  MANYPY_ASSIGN_MEMBER(data, in, "data", what, rapidjson::kArrayType, "an array");
  if (CopySharedMemoryParameters(params, t->mutable_parameters())) {  // its bytes are in the region: no raw entry (one per other input)
    if (data != nullptr || size->has_value()) {
      return InvalidArgument(what + " is in shared memory: it must have neither 'data' nor "
                             "binary_data_size");
    }
    return Status::Ok();
  }
  std::string* raw = wire->add_raw_input_contents();
  if (size->has_value()) {
    if (data != nullptr) return InvalidArgument(what + " has both 'data' and binary_data_size");
    size_t n = static_cast<size_t>(**size);
    if (binary.size() - *binary_used < n) {
      return InvalidArgument(what + ": binary_data_size " + std::to_string(n) +
                             " overruns the request's binary data (" +
                             std::to_string(binary.size()) + " bytes)");
    }
    raw->assign(binary.substr(*binary_used, n));
    *binary_used += n;
    return Status::Ok();
  }
  if (data == nullptr) return InvalidArgument(what + " has neither 'data' nor binary_data_size");
  const DatatypeInfo* dt = FindDatatype(t->datatype());
  // Unknown datatypes go on with no data: Prepare names the one the model expects.
  if (dt == nullptr) return Status::Ok();
  size_t count = 0;
  MANYPY_RETURN_IF_ERROR(JsonToRaw(what, *dt, *data, raw, &count));
  if (numel >= 0 && static_cast<int64_t>(count) != numel) {
    return InvalidArgument(what + " has " + std::to_string(count) + " values in 'data', its shape needs " +
                           std::to_string(numel));
  }
  return Status::Ok();
}

}  // namespace

Status DecodeInferRequest(std::string_view body, std::optional<size_t> json_length,
                          const std::string& model, const std::string& version,
                          HttpInferRequest* out) {
  size_t header = json_length.value_or(body.size());
  if (header > body.size()) {
    return InvalidArgument("Inference-Header-Content-Length " + std::to_string(header) +
                           " exceeds the body (" + std::to_string(body.size()) + " bytes)");
  }
  rapidjson::Document doc;
  MANYPY_RETURN_IF_ERROR(ParseJsonBody(body.substr(0, header), "the inference request", &doc,
                                       JsonNumbers::kAllowNanAndInfinity));
  if (!doc.IsObject()) return InvalidArgument("the request body must be a JSON object");
  auto& wire = out->wire;
  wire.set_model_name(model);
  wire.set_model_version(version);
  MANYPY_ASSIGN_MEMBER(id, doc, "id", "request", rapidjson::kStringType, "a string");
  if (id != nullptr) wire.set_id(id->GetString(), id->GetStringLength());
  MANYPY_ASSIGN_MEMBER(params, doc, "parameters", "request", rapidjson::kObjectType, "an object");
  auto binary_all = BoolParameter(params, "binary_data_output", false, "request");
  if (!binary_all.ok()) return binary_all.status();
  out->binary_data_output = *binary_all;
  auto timeout = IntParameter(params, "timeout", "request");
  if (!timeout.ok()) return timeout.status();
  out->timeout_us = timeout->value_or(0);
  // The rest reach the model as gRPC's do (manypy.request.parameters;
  // sequence_id, sequence_start, sequence_end for a sequence model).
  if (params != nullptr) {
    for (auto p = params->MemberBegin(); p != params->MemberEnd(); ++p) {
      std::string key(p->name.GetString(), p->name.GetStringLength());
      if (key == "binary_data_output") continue;  // how this response is encoded
      JsonToParameter(p->value, &(*wire.mutable_parameters())[key]);
    }
  }

  MANYPY_ASSIGN_MEMBER(inputs, doc, "inputs", "request", rapidjson::kArrayType, "an array");
  if (inputs == nullptr) return InvalidArgument("the request has no 'inputs'");
  std::string_view binary = body.substr(header);
  size_t used = 0;
  for (rapidjson::SizeType i = 0; i < inputs->Size(); ++i) {
    MANYPY_RETURN_IF_ERROR(DecodeInput((*inputs)[i], static_cast<int>(i), binary, &used, &wire));
  }
  if (used != binary.size()) {
    return InvalidArgument("the request has " + std::to_string(binary.size()) +
                           " bytes of binary data, its inputs' binary_data_size add up to " +
                           std::to_string(used));
  }
  MANYPY_ASSIGN_MEMBER(outputs, doc, "outputs", "request", rapidjson::kArrayType, "an array");
  if (outputs == nullptr) return Status::Ok();
  for (rapidjson::SizeType i = 0; i < outputs->Size(); ++i) {
    const Value& o = (*outputs)[i];
    std::string where = "outputs[" + std::to_string(i) + "]";
    if (!o.IsObject()) return InvalidArgument(where + " must be an object");
    MANYPY_ASSIGN_MEMBER(name, o, "name", where, rapidjson::kStringType, "a string");
    if (name == nullptr) return InvalidArgument(where + " has no 'name'");
    MANYPY_ASSIGN_MEMBER(oparams, o, "parameters", where, rapidjson::kObjectType, "an object");
    auto binary_one = BoolParameter(oparams, "binary_data", out->binary_data_output, where);
    if (!binary_one.ok()) return binary_one.status();
    auto* requested = wire.add_outputs();
    requested->set_name(name->GetString(), name->GetStringLength());
    CopySharedMemoryParameters(oparams, requested->mutable_parameters());
    out->binary_outputs.push_back(*binary_one);
  }
  return Status::Ok();
}

StatusOr<HttpInferBody> EncodeInferResponse(const inference::ModelInferResponse& response,
                                            const HttpInferRequest& request) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& a = doc.GetAllocator();
  doc.AddMember("model_name", Value(response.model_name().c_str(), a), a);
  doc.AddMember("model_version", Value(response.model_version().c_str(), a), a);
  if (!response.id().empty()) doc.AddMember("id", Value(response.id().c_str(), a), a);
  Value outputs(rapidjson::kArrayType);
  std::string binary;
  if (response.raw_output_contents_size() != response.outputs_size()) {
    return Internal("the response's outputs are not all raw");
  }
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& o = response.outputs(i);
    const std::string& raw = response.raw_output_contents(i);
    bool as_binary = i < static_cast<int>(request.binary_outputs.size()) ? request.binary_outputs[i]
                                                                        : request.binary_data_output;
    Value out(rapidjson::kObjectType);
    out.AddMember("name", Value(o.name().c_str(), a), a);
    out.AddMember("datatype", Value(o.datatype().c_str(), a), a);
    Value shape(rapidjson::kArrayType);
    for (int64_t d : o.shape()) shape.PushBack(Value(static_cast<int64_t>(d)), a);
    out.AddMember("shape", shape, a);
    if (o.parameters().count("shared_memory_region") != 0) {
      // Written into the client's region: where and how many bytes, no data.
      Value params(rapidjson::kObjectType);
      for (const auto& [key, p] : o.parameters()) {
        params.AddMember(Value(key.c_str(), a), ParameterToJson(p, a), a);
      }
      out.AddMember("parameters", params, a);
    } else if (as_binary) {
      Value params(rapidjson::kObjectType);
      params.AddMember("binary_data_size", Value(static_cast<uint64_t>(raw.size())), a);
      out.AddMember("parameters", params, a);
      binary += raw;
    } else {
      const DatatypeInfo* dt = FindDatatype(o.datatype());
      if (dt == nullptr) return Internal("output '" + o.name() + "' has unknown datatype " + o.datatype());
      Value data(rapidjson::kArrayType);
      Status s = RawToJson(*dt, raw, &data, a);
      if (!s.ok()) return Internal("output '" + o.name() + "': " + s.message());
      out.AddMember("data", data, a);
    }
    outputs.PushBack(out, a);
  }
  doc.AddMember("outputs", outputs, a);
  HttpInferBody result;
  result.body = JsonText(doc);
  if (!binary.empty() || request.binary_data_output ||
      std::find(request.binary_outputs.begin(), request.binary_outputs.end(), true) !=
          request.binary_outputs.end()) {
    result.json_length = result.body.size();
    result.body += binary;
  }
  return result;
}

}  // namespace manypy
