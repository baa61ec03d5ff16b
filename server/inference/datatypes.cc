#include "server/inference/datatypes.h"

#include <map>

namespace manypy {
namespace {

struct DatatypeInfo {
  c10::ScalarType torch_type;
  size_t wire_size;
};

const std::map<std::string, DatatypeInfo>& Table() {
  static const auto* table = new std::map<std::string, DatatypeInfo>{
      {"BOOL", {c10::kBool, 1}},    {"UINT8", {c10::kByte, 1}},   {"UINT16", {c10::kInt, 2}},
      {"UINT32", {c10::kLong, 4}},  {"UINT64", {c10::kLong, 8}},  {"INT8", {c10::kChar, 1}},
      {"INT16", {c10::kShort, 2}},  {"INT32", {c10::kInt, 4}},    {"INT64", {c10::kLong, 8}},
      {"FP16", {c10::kHalf, 2}},    {"BF16", {c10::kBFloat16, 2}}, {"FP32", {c10::kFloat, 4}},
      {"FP64", {c10::kDouble, 8}},
  };
  return *table;
}

}  // namespace

bool TorchTypeFor(const std::string& datatype, c10::ScalarType* out) {
  auto it = Table().find(datatype);
  if (it == Table().end()) return false;
  *out = it->second.torch_type;
  return true;
}

size_t WireElementSize(const std::string& datatype) {
  auto it = Table().find(datatype);
  return it == Table().end() ? 0 : it->second.wire_size;
}

}  // namespace manypy
