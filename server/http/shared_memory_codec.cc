#include "server/http/shared_memory_codec.h"

#include <rapidjson/document.h>

#include "server/http/json_body.h"
#include "server/http/proto_json.h"

namespace manypy {
namespace {

/// `s` as a JSON string, whole: a name or key may hold NUL bytes.
rapidjson::Value Text(const std::string& s, rapidjson::Document::AllocatorType& a) {
  return rapidjson::Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), a);
}

/// `body[key]` into `*out` when it is a non-negative integer; false when it
/// is absent or of another type.
bool SizeOf(const rapidjson::Document& body, const char* key, uint64_t* out) {
  auto it = body.FindMember(key);
  if (it == body.MemberEnd() || !it->value.IsUint64()) return false;
  *out = it->value.GetUint64();
  return true;
}

/// What both kinds of region share: a JSON object, "offset" (when given) and
/// "byte_size" non-negative integers.
Status DecodeRegion(std::string_view text, rapidjson::Document* body, uint64_t* offset,
                    uint64_t* byte_size) {
  MANYPY_RETURN_IF_ERROR(ParseJsonBody(text, "the register request's body", body));
  if (!body->IsObject()) {
    return InvalidArgument("the register request's body is not a JSON object");
  }
  if (body->HasMember("offset") && !SizeOf(*body, "offset", offset)) {
    return InvalidArgument("register: 'offset' must be a non-negative integer");
  }
  if (!SizeOf(*body, "byte_size", byte_size)) {
    return InvalidArgument("register: 'byte_size' must be given, a non-negative integer");
  }
  return Status::Ok();
}

}  // namespace

Status DecodeSystemSharedMemoryRegister(std::string_view text, const std::string& name,
                                        inference::SystemSharedMemoryRegisterRequest* out) {
  rapidjson::Document body;
  uint64_t offset = 0, byte_size = 0;
  if (Status bad = DecodeRegion(text, &body, &offset, &byte_size); !bad.ok()) return bad;
  auto key = body.FindMember("key");
  if (key == body.MemberEnd() || !key->value.IsString()) {
    return InvalidArgument("register: 'key' must be given, a string");
  }
  out->set_name(name);
  out->set_key(key->value.GetString(), key->value.GetStringLength());
  out->set_offset(offset);
  out->set_byte_size(byte_size);
  return Status::Ok();
}

Status DecodeCudaSharedMemoryRegister(std::string_view text, const std::string& name,
                                      inference::CudaSharedMemoryRegisterRequest* out) {
  rapidjson::Document body;
  uint64_t offset = 0, byte_size = 0, device_id = 0;
  if (Status bad = DecodeRegion(text, &body, &offset, &byte_size); !bad.ok()) return bad;
  out->set_name(name);
  out->set_byte_size(byte_size);
  if (SizeOf(body, "device_id", &device_id)) out->set_device_id(static_cast<int64_t>(device_id));
  return Status::Ok();
}

std::string EncodeSystemSharedMemoryStatus(
    const inference::SystemSharedMemoryStatusResponse& status) {
  rapidjson::Document doc(rapidjson::kArrayType);
  auto& a = doc.GetAllocator();
  for (const auto& [region, info] : status.regions()) {
    rapidjson::Value one(rapidjson::kObjectType);
    one.AddMember("name", Text(region, a), a);
    one.AddMember("key", Text(info.key(), a), a);
    one.AddMember("offset", rapidjson::Value(info.offset()), a);
    one.AddMember("byte_size", rapidjson::Value(info.byte_size()), a);
    doc.PushBack(one, a);
  }
  return JsonText(doc);
}

std::string EncodeCudaSharedMemoryStatus(const inference::CudaSharedMemoryStatusResponse& status) {
  rapidjson::Document doc(rapidjson::kArrayType);
  auto& a = doc.GetAllocator();
  for (const auto& [region, info] : status.regions()) {
    rapidjson::Value one(rapidjson::kObjectType);
    one.AddMember("name", Text(region, a), a);
    one.AddMember("device_id", rapidjson::Value(info.device_id()), a);
    one.AddMember("byte_size", rapidjson::Value(info.byte_size()), a);
    doc.PushBack(one, a);
  }
  return JsonText(doc);
}

}  // namespace manypy
