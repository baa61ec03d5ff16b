#include "common/datatype.h"

#include <iterator>

namespace manypy {
namespace {

// InfoOf indexes the table by the enum: every row must sit at its own enum's index.
constexpr bool RowsInEnumOrder() {
  for (size_t i = 0; i < std::size(kDatatypes); ++i)
    if (static_cast<size_t>(kDatatypes[i].type) != i) return false;
  return true;
}
static_assert(RowsInEnumOrder(), "kDatatypes rows must follow the order of enum Datatype");
static_assert(std::size(kDatatypes) == static_cast<size_t>(Datatype::kBytes) + 1,
              "kDatatypes needs one row per Datatype");

}  // namespace

const DatatypeInfo* FindDatatype(const std::string& name) {
  for (const DatatypeInfo& d : kDatatypes)
    if (name == d.name) return &d;
  return nullptr;
}

const std::string& DatatypeNames() {
  static const std::string* names = [] {
    auto* out = new std::string;
    for (const DatatypeInfo& d : kDatatypes)
      *out += (out->empty() ? "" : ", ") + std::string(d.name);
    return out;
  }();
  return *names;
}

}  // namespace manypy
