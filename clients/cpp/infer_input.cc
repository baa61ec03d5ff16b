#include "clients/cpp/infer_input.h"

#include <cstring>

namespace manypy::client {

size_t ElementSize(const std::string& dt) {
  const DatatypeInfo* info = FindDatatype(dt);
  return info == nullptr ? 0 : info->wire_size;
}

int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string EncodeBytesElements(const std::vector<std::string>& elements) {
  std::string raw;
  for (const auto& e : elements) {
    uint32_t n = static_cast<uint32_t>(e.size());
    char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                   static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    raw.append(len, 4).append(e);
  }
  return raw;
}

bool DecodeBytesElements(const std::string& raw, std::vector<std::string>* out) {
  out->clear();
  size_t at = 0;
  while (at < raw.size()) {
    if (raw.size() - at < 4) return false;
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data() + at);
    uint32_t n = p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
    at += 4;
    if (raw.size() - at < n) return false;
    out->push_back(raw.substr(at, n));
    at += n;
  }
  return true;
}

InferInput InferInput::FromStrings(std::string name, const std::vector<std::string>& values,
                                   std::vector<int64_t> shape) {
  if (shape.empty()) shape = {static_cast<int64_t>(values.size())};
  return InferInput{std::move(name), "BYTES", std::move(shape), EncodeBytesElements(values)};
}

InferInput InferInput::FromRaw(std::string name, std::string datatype, std::vector<int64_t> shape,
                               std::string raw) {
  return InferInput{std::move(name), std::move(datatype), std::move(shape), std::move(raw)};
}

}  // namespace manypy::client
