#include "clients/cpp/contents_codec.h"

#include <cstring>
#include <vector>

#include "clients/cpp/infer_input.h"
#include "common/datatype.h"

namespace manypy::client {
namespace {

// Appends each element of `raw` (as Wire) to `field`, converted to the field's type.
template <typename Wire, typename Field>
void Unpack(const std::string& raw, Field* field) {
  for (size_t at = 0; at + sizeof(Wire) <= raw.size(); at += sizeof(Wire)) {
    Wire v;
    memcpy(&v, raw.data() + at, sizeof(Wire));
    field->Add(v);
  }
}

// Packs the elements of `field` as Wire values.
template <typename Wire, typename Field>
std::string Pack(const Field& field) {
  std::string raw(field.size() * sizeof(Wire), '\0');
  size_t at = 0;
  for (const auto& f : field) {
    Wire v = static_cast<Wire>(f);
    memcpy(raw.data() + at, &v, sizeof(Wire));
    at += sizeof(Wire);
  }
  return raw;
}

}  // namespace

Status RawToContents(const std::string& dt, const std::string& raw,
                     inference::InferTensorContents* c) {
  const DatatypeInfo* info = FindDatatype(dt);
  if (info == nullptr) return InvalidArgument("unknown datatype '" + dt + "'");
  if (info->type == Datatype::kBytes) {
    std::vector<std::string> elements;
    if (!DecodeBytesElements(raw, &elements)) {
      return InvalidArgument("BYTES data is not a sequence of 4-byte length-prefixed elements");
    }
    for (auto& e : elements) c->add_bytes_contents(std::move(e));
    return Status::Ok();
  }
  size_t width = info->wire_size;
  if (raw.size() % width != 0) {
    return InvalidArgument(std::to_string(raw.size()) + " bytes is not a whole number of " + dt +
                           " elements");
  }
  // INT8/16/32 share int_contents (UINT8/16/32 uint_contents): the width picks the wire type.
  switch (info->typed_field) {
    case TypedField::kBool:
      for (char b : raw) c->add_bool_contents(b != 0);
      break;
    case TypedField::kInt:
      if (width == 1) Unpack<int8_t>(raw, c->mutable_int_contents());
      else if (width == 2) Unpack<int16_t>(raw, c->mutable_int_contents());
      else Unpack<int32_t>(raw, c->mutable_int_contents());
      break;
    case TypedField::kInt64: Unpack<int64_t>(raw, c->mutable_int64_contents()); break;
    case TypedField::kUint:
      if (width == 1) Unpack<uint8_t>(raw, c->mutable_uint_contents());
      else if (width == 2) Unpack<uint16_t>(raw, c->mutable_uint_contents());
      else Unpack<uint32_t>(raw, c->mutable_uint_contents());
      break;
    case TypedField::kUint64: Unpack<uint64_t>(raw, c->mutable_uint64_contents()); break;
    case TypedField::kFp32: Unpack<float>(raw, c->mutable_fp32_contents()); break;
    case TypedField::kFp64: Unpack<double>(raw, c->mutable_fp64_contents()); break;
    case TypedField::kBytes:  // handled above
    case TypedField::kNone:
      return InvalidArgument(dt + " has no typed contents field; send it as raw bytes");
  }
  return Status::Ok();
}

StatusOr<std::string> ContentsToRaw(const std::string& dt, const inference::InferTensorContents& c) {
  const DatatypeInfo* info = FindDatatype(dt);
  switch (info == nullptr ? TypedField::kNone : info->typed_field) {
    case TypedField::kBytes:
      return EncodeBytesElements(std::vector<std::string>(c.bytes_contents().begin(),
                                                          c.bytes_contents().end()));
    case TypedField::kBool: return Pack<uint8_t>(c.bool_contents());
    case TypedField::kInt:
      if (info->wire_size == 1) return Pack<int8_t>(c.int_contents());
      if (info->wire_size == 2) return Pack<int16_t>(c.int_contents());
      return Pack<int32_t>(c.int_contents());
    case TypedField::kInt64: return Pack<int64_t>(c.int64_contents());
    case TypedField::kUint:
      if (info->wire_size == 1) return Pack<uint8_t>(c.uint_contents());
      if (info->wire_size == 2) return Pack<uint16_t>(c.uint_contents());
      return Pack<uint32_t>(c.uint_contents());
    case TypedField::kUint64: return Pack<uint64_t>(c.uint64_contents());
    case TypedField::kFp32: return Pack<float>(c.fp32_contents());
    case TypedField::kFp64: return Pack<double>(c.fp64_contents());
    case TypedField::kNone: break;
  }
  return InvalidArgument("output datatype '" + dt + "' has no typed contents field");
}

}  // namespace manypy::client
