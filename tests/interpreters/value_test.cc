#include "interpreters/value.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace manypy {
namespace {

TEST(ValueTest, ScalarsKeepTheirKinds) {
  EXPECT_TRUE(Value().is_none());
  EXPECT_EQ(Value(true).kind(), Value::Kind::kBool);
  EXPECT_EQ(Value(7).to_int(), 7);
  EXPECT_EQ(Value(int64_t{1} << 40).to_int(), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(Value(2.5).to_double(), 2.5);
  EXPECT_DOUBLE_EQ(Value(3).to_double(), 3.0);
  EXPECT_EQ(Value("text").to_str(), "text");
  EXPECT_EQ(Value::Bytes(std::string("\0\1", 2)).to_bytes().size(), 2u);
}

TEST(ValueTest, MismatchedAccessNamesBothKinds) {
  try {
    Value("x").to_int();
    FAIL() << "expected an exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "expected a int value, got str");
  }
}

TEST(ValueTest, ContainersAndLookup) {
  Value d = Value::Dict({{Value("a"), Value(1)}, {Value("b"), Value::List({Value(2), Value()})}});
  ASSERT_NE(d.Find("b"), nullptr);
  EXPECT_EQ(d.Find("b")->items().size(), 2u);
  EXPECT_EQ(d.Find("missing"), nullptr);
  EXPECT_EQ(d.DebugString(), "{'a': 1, 'b': [2, None]}");
  EXPECT_EQ(Value::Tuple({Value(1)}).kind(), Value::Kind::kTuple);
}

TEST(ValueTest, TensorIsHeldWithoutCopy) {
  at::Tensor t = at::arange(4);
  Value v(t);
  EXPECT_EQ(v.to_tensor().data_ptr(), t.data_ptr());
}

}  // namespace
}  // namespace manypy
