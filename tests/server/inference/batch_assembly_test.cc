// JoinInputs / SplitOutputs: tensors concatenate along dim 0 and split back
// as views; BYTES inputs (lists) join and split as lists.
#include "server/inference/batch_assembly.h"

#include <gtest/gtest.h>

#include "tests/test_util/request_builder.h"

namespace manypy {
namespace {

using testing::Answers;
using testing::MakeRequest;

Manifest TwoOutputs() {
  Manifest m;
  m.name = "m";
  m.max_batch_size = 8;
  m.outputs = {{"T", "FP32", {2}}, {"S", "BYTES", {1}}};
  return m;
}

std::vector<RequestPtr> Batch(std::shared_ptr<Answers> answers) {
  std::vector<RequestPtr> batch;
  batch.push_back(MakeRequest(answers, 1, 1));
  batch.push_back(MakeRequest(answers, 2, 2));
  // A BYTES input beside the tensor: one list item per row.
  batch[0]->inputs.push_back(Value::List({Value::List({Value::Bytes("a")})}));
  batch[1]->inputs.push_back(
      Value::List({Value::List({Value::Bytes("b")}), Value::List({Value::Bytes("c")})}));
  return batch;
}

TEST(BatchAssemblyTest, JoinsTensorsAndBytesListsInRequestOrder) {
  auto answers = std::make_shared<Answers>();
  auto batch = Batch(answers);
  std::vector<Value> joined = JoinInputs(batch);
  ASSERT_EQ(joined.size(), 2u);
  EXPECT_TRUE(at::equal(joined[0].to_tensor(),
                        at::cat({at::full({1, 2}, 1.f), at::full({2, 2}, 2.f)}, 0)));
  ASSERT_EQ(joined[1].items().size(), 3u);
  EXPECT_EQ(joined[1].items()[2].items()[0].to_bytes(), "c");
}

TEST(BatchAssemblyTest, SplitsEachOutputBackIntoEachRequestsRows) {
  auto answers = std::make_shared<Answers>();
  auto batch = Batch(answers);
  at::Tensor t = at::arange(6, at::kFloat).reshape({3, 2});
  Value s = Value::List({Value::List({Value::Bytes("x")}), Value::List({Value::Bytes("y")}),
                         Value::List({Value::Bytes("z")})});
  std::vector<std::vector<Value>> split;
  ASSERT_TRUE(SplitOutputs(TwoOutputs(), batch, {Value(t), s}, &split).ok());
  ASSERT_EQ(split.size(), 2u);
  EXPECT_TRUE(at::equal(split[0][0].to_tensor(), t.narrow(0, 0, 1)));
  EXPECT_TRUE(at::equal(split[1][0].to_tensor(), t.narrow(0, 1, 2)));
  EXPECT_EQ(split[1][0].to_tensor().data_ptr(), t.narrow(0, 1, 2).data_ptr());  // a view
  EXPECT_EQ(split[0][1].items().size(), 1u);
  EXPECT_EQ(split[1][1].items()[1].items()[0].to_bytes(), "z");
}

TEST(BatchAssemblyTest, OutputWithTheWrongRowCountNamesTheOutput) {
  auto answers = std::make_shared<Answers>();
  auto batch = Batch(answers);
  std::vector<std::vector<Value>> split;
  Status s = SplitOutputs(TwoOutputs(), batch, {Value(at::zeros({2, 2})), Value::List({})}, &split);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_NE(s.message().find("output 'T' with 2 rows for a batch of 3 rows"), std::string::npos)
      << s.message();
}

TEST(BatchAssemblyTest, OneRequestPassesThroughWithoutACopy) {
  auto answers = std::make_shared<Answers>();
  std::vector<RequestPtr> one;
  one.push_back(MakeRequest(answers, 3, 4));
  const void* data = one[0]->inputs[0].to_tensor().data_ptr();
  EXPECT_EQ(JoinInputs(one)[0].to_tensor().data_ptr(), data);
  std::vector<std::vector<Value>> split;
  ASSERT_TRUE(SplitOutputs(TwoOutputs(), one, {Value(at::zeros({7})), Value()}, &split).ok());
  EXPECT_EQ(split[0][0].to_tensor().size(0), 7);  // unbatched semantics: not checked
}

}  // namespace
}  // namespace manypy
