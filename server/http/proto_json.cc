#include "server/http/proto_json.h"

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

namespace manypy {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using rapidjson::Value;

Value JsonString(const std::string& s, rapidjson::Document::AllocatorType& alloc) {
  return Value(s.data(), static_cast<rapidjson::SizeType>(s.size()), alloc);
}

// One element of field `f` (index -1: a singular field).
Value FieldValue(const Message& m, const FieldDescriptor* f, int index,
                 rapidjson::Document::AllocatorType& alloc) {
  const Reflection* r = m.GetReflection();
  bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return Value(rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return Value(static_cast<int64_t>(rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f)));
    case FieldDescriptor::CPPTYPE_UINT32:
      return Value(rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
    case FieldDescriptor::CPPTYPE_UINT64:
      return Value(
          static_cast<uint64_t>(rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f)));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Value(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Value(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_BOOL:
      return Value(rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f));
    case FieldDescriptor::CPPTYPE_ENUM:
      return JsonString((rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name(), alloc);
    case FieldDescriptor::CPPTYPE_STRING:
      return JsonString(rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f), alloc);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ProtoToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f), alloc);
  }
  return Value();
}

}  // namespace

Value ProtoToJson(const Message& m, rapidjson::Document::AllocatorType& alloc) {
  Value out(rapidjson::kObjectType);
  const auto* d = m.GetDescriptor();
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    bool optional_kind = f->containing_oneof() != nullptr ||
                         (!f->is_repeated() && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE);
    if (optional_kind && !m.GetReflection()->HasField(m, f)) continue;
    Value name = JsonString(f->name(), alloc);
    if (f->is_map()) {  // map<string, Message-or-scalar>: entries are key/value messages
      Value map(rapidjson::kObjectType);
      const Reflection* r = m.GetReflection();
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        const Message& entry = r->GetRepeatedMessage(m, f, i);
        const auto* d = entry.GetDescriptor();
        Value key = FieldValue(entry, d->FindFieldByNumber(1), -1, alloc);
        if (!key.IsString()) continue;  // the protocol's maps are keyed by string
        map.AddMember(key, FieldValue(entry, d->FindFieldByNumber(2), -1, alloc), alloc);
      }
      out.AddMember(name, map, alloc);
    } else if (f->is_repeated()) {
      Value array(rapidjson::kArrayType);
      int n = m.GetReflection()->FieldSize(m, f);
      for (int i = 0; i < n; ++i) array.PushBack(FieldValue(m, f, i, alloc), alloc);
      out.AddMember(name, array, alloc);
    } else {
      out.AddMember(name, FieldValue(m, f, -1, alloc), alloc);
    }
  }
  return out;
}

std::string JsonText(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  // NaN and infinities as NaN / Infinity (as Python's json reads them), not a failed write.
  rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                    rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>
      writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

rapidjson::Value ParameterToJson(const inference::InferParameter& p,
                                 rapidjson::Document::AllocatorType& alloc) {
  using P = inference::InferParameter;
  switch (p.parameter_choice_case()) {
    case P::kBoolParam: return Value(p.bool_param());
    case P::kInt64Param: return Value(p.int64_param());
    case P::kUint64Param: return Value(p.uint64_param());
    case P::kDoubleParam: return Value(p.double_param());
    case P::kStringParam: return JsonString(p.string_param(), alloc);
    default: return Value();
  }
}

void JsonToParameter(const rapidjson::Value& v, inference::InferParameter* p) {
  if (v.IsBool()) {
    p->set_bool_param(v.GetBool());
  } else if (v.IsInt64()) {
    p->set_int64_param(v.GetInt64());
  } else if (v.IsUint64()) {  // a sequence_id past int64's range
    p->set_uint64_param(v.GetUint64());
  } else if (v.IsNumber()) {
    p->set_double_param(v.GetDouble());
  } else if (v.IsString()) {
    p->set_string_param(std::string(v.GetString(), v.GetStringLength()));
  } else {
    p->set_string_param(JsonText(v));
  }
}

}  // namespace manypy
