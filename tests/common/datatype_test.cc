// The datatype table of common/datatype.h: names round-trip, wire sizes, typed
// fields, and config enum values equal to the generated model_config.proto's.

#include "common/datatype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "proto/model_config.pb.h"

namespace manypy {
namespace {

TEST(DatatypeTable, NamesRoundTrip) {
  std::set<std::string> names;
  for (const DatatypeInfo& d : kDatatypes) {
    EXPECT_TRUE(names.insert(d.name).second) << "duplicate " << d.name;
    const DatatypeInfo* found = FindDatatype(d.name);
    ASSERT_NE(found, nullptr) << d.name;
    EXPECT_EQ(found, &InfoOf(d.type)) << d.name;
  }
  EXPECT_EQ(names.size(), 14u);
  EXPECT_EQ(FindDatatype("FLOAT32"), nullptr);
  EXPECT_EQ(FindDatatype("fp32"), nullptr);  // the protocol's names are case-sensitive
  EXPECT_EQ(FindDatatype(""), nullptr);
}

TEST(DatatypeTable, NamesListedInProtocolOrder) {
  // The manifest's "unknown datatype" error lists them in this order (manifest_test checks it).
  EXPECT_EQ(DatatypeNames(),
            "BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32, INT64, FP16, BF16, FP32, "
            "FP64, BYTES");
}

TEST(DatatypeTable, WireSizes) {
  EXPECT_EQ(InfoOf(Datatype::kBool).wire_size, 1u);
  EXPECT_EQ(InfoOf(Datatype::kUint8).wire_size, 1u);
  EXPECT_EQ(InfoOf(Datatype::kInt8).wire_size, 1u);
  EXPECT_EQ(InfoOf(Datatype::kUint16).wire_size, 2u);
  EXPECT_EQ(InfoOf(Datatype::kInt16).wire_size, 2u);
  EXPECT_EQ(InfoOf(Datatype::kFp16).wire_size, 2u);
  EXPECT_EQ(InfoOf(Datatype::kBf16).wire_size, 2u);
  EXPECT_EQ(InfoOf(Datatype::kUint32).wire_size, 4u);
  EXPECT_EQ(InfoOf(Datatype::kInt32).wire_size, 4u);
  EXPECT_EQ(InfoOf(Datatype::kFp32).wire_size, 4u);
  EXPECT_EQ(InfoOf(Datatype::kUint64).wire_size, 8u);
  EXPECT_EQ(InfoOf(Datatype::kInt64).wire_size, 8u);
  EXPECT_EQ(InfoOf(Datatype::kFp64).wire_size, 8u);
  EXPECT_EQ(FindDatatype("BYTES")->wire_size, 0u);  // length-prefixed, no fixed size
}

TEST(DatatypeTable, TypedFields) {
  EXPECT_EQ(InfoOf(Datatype::kFp16).typed_field, TypedField::kNone);
  EXPECT_EQ(InfoOf(Datatype::kBf16).typed_field, TypedField::kNone);
  EXPECT_EQ(InfoOf(Datatype::kBool).typed_field, TypedField::kBool);
  EXPECT_EQ(InfoOf(Datatype::kInt16).typed_field, TypedField::kInt);
  EXPECT_EQ(InfoOf(Datatype::kInt64).typed_field, TypedField::kInt64);
  EXPECT_EQ(InfoOf(Datatype::kUint32).typed_field, TypedField::kUint);
  EXPECT_EQ(InfoOf(Datatype::kUint64).typed_field, TypedField::kUint64);
  EXPECT_EQ(InfoOf(Datatype::kFp32).typed_field, TypedField::kFp32);
  EXPECT_EQ(InfoOf(Datatype::kFp64).typed_field, TypedField::kFp64);
  EXPECT_EQ(InfoOf(Datatype::kBytes).typed_field, TypedField::kBytes);
}

TEST(DatatypeTable, ConfigEnumsMatchModelConfigProto) {
  // Protocol name -> model_config.proto name: TYPE_ + name, except BYTES -> TYPE_STRING.
  for (const DatatypeInfo& d : kDatatypes) {
    std::string enum_name =
        d.type == Datatype::kBytes ? "TYPE_STRING" : "TYPE_" + std::string(d.name);
    inference::DataType expected;
    ASSERT_TRUE(inference::DataType_Parse(enum_name, &expected)) << enum_name;
    EXPECT_EQ(d.config_enum, static_cast<int>(expected)) << d.name;
  }
  EXPECT_EQ(InfoOf(Datatype::kBytes).config_enum, inference::TYPE_STRING);
  EXPECT_EQ(InfoOf(Datatype::kBf16).config_enum, inference::TYPE_BF16);
}

}  // namespace
}  // namespace manypy
