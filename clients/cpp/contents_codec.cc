#include "clients/cpp/contents_codec.h"

#include <cstring>
#include <vector>

#include "clients/cpp/infer_input.h"

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
  if (dt == "BYTES") {
    std::vector<std::string> elements;
    if (!DecodeBytesElements(raw, &elements)) {
      return InvalidArgument("BYTES data is not a sequence of 4-byte length-prefixed elements");
    }
    for (auto& e : elements) c->add_bytes_contents(std::move(e));
    return Status::Ok();
  }
  size_t width = ElementSize(dt);
  if (width == 0) return InvalidArgument("unknown datatype '" + dt + "'");
  if (raw.size() % width != 0) {
    return InvalidArgument(std::to_string(raw.size()) + " bytes is not a whole number of " + dt +
                           " elements");
  }
  if (dt == "BOOL") {
    for (char b : raw) c->add_bool_contents(b != 0);
  } else if (dt == "INT8") Unpack<int8_t>(raw, c->mutable_int_contents());
  else if (dt == "INT16") Unpack<int16_t>(raw, c->mutable_int_contents());
  else if (dt == "INT32") Unpack<int32_t>(raw, c->mutable_int_contents());
  else if (dt == "INT64") Unpack<int64_t>(raw, c->mutable_int64_contents());
  else if (dt == "UINT8") Unpack<uint8_t>(raw, c->mutable_uint_contents());
  else if (dt == "UINT16") Unpack<uint16_t>(raw, c->mutable_uint_contents());
  else if (dt == "UINT32") Unpack<uint32_t>(raw, c->mutable_uint_contents());
  else if (dt == "UINT64") Unpack<uint64_t>(raw, c->mutable_uint64_contents());
  else if (dt == "FP32") Unpack<float>(raw, c->mutable_fp32_contents());
  else if (dt == "FP64") Unpack<double>(raw, c->mutable_fp64_contents());
  else return InvalidArgument(dt + " has no typed contents field; send it as raw bytes");
  return Status::Ok();
}

StatusOr<std::string> ContentsToRaw(const std::string& dt, const inference::InferTensorContents& c) {
  if (dt == "BYTES") {
    return EncodeBytesElements(std::vector<std::string>(c.bytes_contents().begin(),
                                                        c.bytes_contents().end()));
  }
  if (dt == "BOOL") return Pack<uint8_t>(c.bool_contents());
  if (dt == "INT8") return Pack<int8_t>(c.int_contents());
  if (dt == "INT16") return Pack<int16_t>(c.int_contents());
  if (dt == "INT32") return Pack<int32_t>(c.int_contents());
  if (dt == "INT64") return Pack<int64_t>(c.int64_contents());
  if (dt == "UINT8") return Pack<uint8_t>(c.uint_contents());
  if (dt == "UINT16") return Pack<uint16_t>(c.uint_contents());
  if (dt == "UINT32") return Pack<uint32_t>(c.uint_contents());
  if (dt == "UINT64") return Pack<uint64_t>(c.uint64_contents());
  if (dt == "FP32") return Pack<float>(c.fp32_contents());
  if (dt == "FP64") return Pack<double>(c.fp64_contents());
  return InvalidArgument("output datatype '" + dt + "' has no typed contents field");
}

}  // namespace manypy::client
