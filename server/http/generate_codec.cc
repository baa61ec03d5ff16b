#include "server/http/generate_codec.h"

#include <rapidjson/document.h>

#include <functional>

#include "common/datatype.h"
#include "server/http/json_body.h"
#include "server/http/proto_json.h"
#include "server/http/tensor_json.h"

namespace manypy {
namespace {

// A value's shape from its nesting (arrays of equal length all the way down).
Status ShapeOf(const std::string& field, const rapidjson::Value& v, std::vector<int64_t>* shape) {
  const rapidjson::Value* at = &v;
  while (at->IsArray()) {
    shape->push_back(static_cast<int64_t>(at->Size()));
    if (at->Empty()) break;
    at = &(*at)[0];
  }
  // Every array at one depth must be as long as the first: check by count.
  std::function<Status(const rapidjson::Value&, size_t)> check = [&](const rapidjson::Value& x,
                                                                     size_t depth) -> Status {
    if (depth == shape->size()) {
      if (x.IsArray()) return InvalidArgument("generate field '" + field + "' is ragged: nested arrays of different depths");
      return Status::Ok();
    }
    if (!x.IsArray() || static_cast<int64_t>(x.Size()) != (*shape)[depth]) {
      return InvalidArgument("generate field '" + field + "' is ragged: arrays at depth " +
                             std::to_string(depth) + " differ in length");
    }
    for (const auto& e : x.GetArray()) MANYPY_RETURN_IF_ERROR(check(e, depth + 1));
    return Status::Ok();
  };
  return check(v, 0);
}

}  // namespace

Status DecodeGenerateRequest(std::string_view body, const inference::ModelMetadataResponse& metadata,
                             const std::string& version, inference::ModelInferRequest* wire,
                             int64_t* timeout_us) {
  rapidjson::Document doc;
  MANYPY_RETURN_IF_ERROR(ParseJsonBody(body, "the generate request", &doc));
  if (!doc.IsObject()) return InvalidArgument("the generate request is not a JSON object");
  wire->set_model_name(metadata.name());
  wire->set_model_version(version);
  for (const auto& member : doc.GetObject()) {
    std::string field(member.name.GetString(), member.name.GetStringLength());
    const rapidjson::Value& value = member.value;
    if (field == "id") {
      if (!value.IsString()) return InvalidArgument("generate field 'id' is not a string");
      wire->set_id(std::string(value.GetString(), value.GetStringLength()));
      continue;
    }
    if (field == "parameters") {
      if (!value.IsObject()) return InvalidArgument("generate field 'parameters' is not an object");
      for (const auto& p : value.GetObject()) {
        std::string key(p.name.GetString(), p.name.GetStringLength());
        if (key == "timeout" && p.value.IsInt64()) *timeout_us = p.value.GetInt64();
        JsonToParameter(p.value, &(*wire->mutable_parameters())[key]);
      }
      continue;
    }
    const inference::ModelMetadataResponse::TensorMetadata* input = nullptr;
    for (const auto& in : metadata.inputs()) {
      if (in.name() == field) input = &in;
    }
    if (input == nullptr) {
      std::string names;
      for (const auto& in : metadata.inputs()) names += (names.empty() ? "" : ", ") + in.name();
      return InvalidArgument("generate field '" + field + "' is not an input of model '" +
                             metadata.name() + "' (its inputs: " + names + ")");
    }
    const DatatypeInfo* dt = FindDatatype(input->datatype());
    if (dt == nullptr) return Internal("input '" + field + "' has unknown datatype " + input->datatype());
    std::vector<int64_t> shape;
    MANYPY_RETURN_IF_ERROR(ShapeOf(field, value, &shape));
    while (shape.size() < static_cast<size_t>(input->shape_size())) shape.insert(shape.begin(), 1);
    std::string raw;
    size_t count = 0;
    MANYPY_RETURN_IF_ERROR(JsonToRaw("generate field '" + field + "'", *dt, value, &raw, &count));
    auto* tensor = wire->add_inputs();
    tensor->set_name(field);
    tensor->set_datatype(input->datatype());
    for (int64_t d : shape) tensor->add_shape(d);
    wire->add_raw_input_contents(std::move(raw));
  }
  return Status::Ok();
}

StatusOr<std::string> EncodeGenerateResponse(const inference::ModelInferResponse& response) {
  rapidjson::Document doc(rapidjson::kObjectType);
  auto& alloc = doc.GetAllocator();
  auto text = [&](const std::string& s) { return rapidjson::Value(s.c_str(), static_cast<rapidjson::SizeType>(s.size()), alloc); };
  doc.AddMember("model_name", text(response.model_name()), alloc);
  doc.AddMember("model_version", text(response.model_version()), alloc);
  if (!response.id().empty()) doc.AddMember("id", text(response.id()), alloc);
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& out = response.outputs(i);
    const DatatypeInfo* dt = FindDatatype(out.datatype());
    if (dt == nullptr || i >= response.raw_output_contents_size()) {
      return Internal("output '" + out.name() + "' has no raw contents to encode");
    }
    rapidjson::Value values(rapidjson::kArrayType);
    MANYPY_RETURN_IF_ERROR(RawToJson(*dt, response.raw_output_contents(i), &values, alloc));
    rapidjson::Value name = text(out.name());
    if (values.Size() == 1) {
      rapidjson::Value one(values[0], alloc);
      doc.AddMember(name, one, alloc);
    } else {
      doc.AddMember(name, values, alloc);
    }
  }
  return JsonText(doc);
}

}  // namespace manypy
