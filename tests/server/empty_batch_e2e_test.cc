// End-to-end, gRPC and HTTP: a request whose batch dimension is 0 is served,
// as Triton serves it (docs/packaging.md#empty-batches): outputs with 0 rows,
// answered from the signature without calling the model when the signature
// fixes every output (tagged_double, which raises if called so), run by the
// model otherwise (echo_rows); a batch above max_batch_size is still refused.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <string>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

using testing::HttpConnection;

ModelInferRequest TaggedDoubleRequest(int64_t rows) {
  ModelInferRequest r;
  r.set_model_name("tagged_double");
  auto* x = r.add_inputs();
  x->set_name("X");
  x->set_datatype("FP32");
  x->add_shape(rows);
  x->add_shape(3);
  r.add_raw_input_contents(Raw(std::vector<float>(static_cast<size_t>(rows) * 3, 1.f)));
  return r;
}

ModelInferRequest EchoRowsRequest(int64_t rows, int64_t width) {
  ModelInferRequest r;
  r.set_model_name("echo_rows");
  auto* x = r.add_inputs();
  x->set_name("X");
  x->set_datatype("FP32");
  x->add_shape(rows);
  x->add_shape(width);
  auto* t = r.add_inputs();
  t->set_name("T");
  t->set_datatype("BYTES");
  t->add_shape(rows);
  t->add_shape(1);
  r.add_raw_input_contents(Raw(std::vector<float>(static_cast<size_t>(rows * width), 1.f)));
  std::string texts;
  for (int64_t i = 0; i < rows; ++i) texts += std::string("\x02\x00\x00\x00", 4) + "ab";
  r.add_raw_input_contents(texts);
  return r;
}

std::vector<int64_t> ShapeOf(const inference::ModelInferResponse::InferOutputTensor& t) {
  return {t.shape().begin(), t.shape().end()};
}

class EmptyBatchTest : public ServerTest {
 protected:
  void Start() {
    StartServer({"--model-control-mode=explicit", "--load-model=tagged_double",
                 "--load-model=echo_rows", "--no-metrics"});
  }
};

TEST_F(EmptyBatchTest, FixedSignatureIsAnsweredWithoutCallingTheModel) {
  Start();
  uint64_t executions = Statistics("tagged_double").execution_count();  // the warm-up's
  ModelInferResponse out;
  grpc::Status s = Infer(TaggedDoubleRequest(0), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(out.outputs_size(), 2);
  EXPECT_EQ(out.outputs(0).name(), "Y");
  EXPECT_EQ(out.outputs(0).datatype(), "FP32");
  EXPECT_EQ(ShapeOf(out.outputs(0)), (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(out.outputs(1).datatype(), "BYTES");
  EXPECT_EQ(ShapeOf(out.outputs(1)), (std::vector<int64_t>{0, 1}));
  ASSERT_EQ(out.raw_output_contents_size(), 2);
  EXPECT_TRUE(out.raw_output_contents(0).empty());
  EXPECT_TRUE(out.raw_output_contents(1).empty());
  auto stats = Statistics("tagged_double");
  EXPECT_EQ(stats.execution_count(), executions) << "the model ran for an empty batch";
  EXPECT_EQ(stats.inference_stats().success().count(), 1u);
  // The same model still runs non-empty batches.
  ASSERT_TRUE(Infer(TaggedDoubleRequest(2), &out).ok());
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), std::vector<float>(6, 2.f));
  EXPECT_EQ(Statistics("tagged_double").execution_count(), executions + 1);
}

TEST_F(EmptyBatchTest, VariableOutputDimensionRunsTheModelOnZeroRows) {
  Start();
  uint64_t executions = Statistics("echo_rows").execution_count();
  ModelInferResponse out;
  grpc::Status s = Infer(EchoRowsRequest(0, 5), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(out.outputs_size(), 2);
  EXPECT_EQ(ShapeOf(out.outputs(0)), (std::vector<int64_t>{0, 5}));  // the model's own answer
  EXPECT_EQ(ShapeOf(out.outputs(1)), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Statistics("echo_rows").execution_count(), executions + 1);
  ASSERT_TRUE(Infer(EchoRowsRequest(2, 5), &out).ok());
  EXPECT_EQ(ShapeOf(out.outputs(0)), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(out.raw_output_contents(1), std::string("\x02\x00\x00\x00" "AB\x02\x00\x00\x00" "AB", 12));
}

TEST_F(EmptyBatchTest, ABatchAboveMaxBatchSizeIsStillRefused) {
  Start();
  ModelInferResponse out;
  grpc::Status s = Infer(TaggedDoubleRequest(9), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("has batch size 9, model 'tagged_double' accepts 0..8"),
            std::string::npos)
      << s.error_message();
}

TEST_F(EmptyBatchTest, HttpJsonServesAnEmptyBatchOfBothKinds) {
  Start();
  HttpConnection http(server_.http_port());
  auto reply = http.Send("POST", "/v2/models/tagged_double/infer",
                         R"({"inputs": [{"name": "X", "shape": [0, 3], "datatype": "FP32", "data": []}]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  rapidjson::Document doc;
  doc.Parse(reply.body.c_str());
  ASSERT_TRUE(doc.IsObject()) << reply.body;
  const auto& outputs = doc["outputs"];
  ASSERT_EQ(outputs.Size(), 2u) << reply.body;
  EXPECT_EQ(outputs[0]["shape"][0].GetInt(), 0);
  EXPECT_EQ(outputs[0]["shape"][1].GetInt(), 3);
  EXPECT_EQ(outputs[0]["data"].Size(), 0u);
  EXPECT_EQ(outputs[1]["shape"][1].GetInt(), 1);
  EXPECT_EQ(outputs[1]["data"].Size(), 0u);

  reply = http.Send("POST", "/v2/models/echo_rows/infer", R"({"inputs": [
      {"name": "X", "shape": [0, 2], "datatype": "FP32", "data": []},
      {"name": "T", "shape": [0, 1], "datatype": "BYTES", "data": []}]})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  doc.Parse(reply.body.c_str());
  ASSERT_TRUE(doc.IsObject()) << reply.body;
  EXPECT_EQ(doc["outputs"][0]["shape"][1].GetInt(), 2) << reply.body;
  EXPECT_EQ(doc["outputs"][1]["shape"][0].GetInt(), 0) << reply.body;
}

}  // namespace
}  // namespace manypy
