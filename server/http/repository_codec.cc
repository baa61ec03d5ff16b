#include "server/http/repository_codec.h"

#include <rapidjson/document.h>

#include "server/http/json_body.h"
#include "server/http/proto_json.h"

namespace manypy {

bool DecodeRepositoryIndexRequest(std::string_view text) {
  rapidjson::Document body;
  return !text.empty() && ParseJsonBody(text, "the repository index request", &body).ok() &&
         body.IsObject() && body.HasMember("ready") && body["ready"].IsBool() &&
         body["ready"].GetBool();
}

std::string EncodeRepositoryIndex(const inference::RepositoryIndexResponse& index) {
  rapidjson::Document doc(rapidjson::kArrayType);
  for (const auto& m : index.models())
    doc.PushBack(ProtoToJson(m, doc.GetAllocator()), doc.GetAllocator());
  return JsonText(doc);
}

Status DecodeLoadRequest(std::string_view text, std::vector<std::string>* names) {
  if (text.empty()) return Status::Ok();
  rapidjson::Document doc;
  MANYPY_RETURN_IF_ERROR(ParseJsonBody(text, "the load request's body", &doc));
  if (!doc.IsObject()) {
    return InvalidArgument("the load request's body is not a JSON object");
  }
  if (!doc.HasMember("parameters")) return Status::Ok();
  if (!doc["parameters"].IsObject())
    return InvalidArgument("the load request's \"parameters\" is not an object");
  for (const auto& m : doc["parameters"].GetObject()) {
    names->emplace_back(m.name.GetString(), m.name.GetStringLength());
  }
  return Status::Ok();
}

}  // namespace manypy
