// The response cache end to end (the real server, gRPC and HTTP): a repeated
// request is answered from the cache, byte-equal to the computed answer, and
// counted where Triton counts it (cache_hit / cache_miss) and on /metrics; a
// reload drops the old version's entries; a streaming model is refused it;
// a model without it never reaches the cache.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <sstream>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

// two_io's request over HTTP, the same tensors as TwoIoRequest's.
const char* kTwoIoJson = R"({"inputs": [
  {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
  {"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [10, 20, 30, 40]}]})";

class ResponseCacheTest : public ServerTest {
 protected:
  /// The value of `metric` for `model` on /metrics (0 if absent), or the
  /// unlabelled `metric` when `model` is empty.
  double Metric(const std::string& metric, const std::string& model = "") {
    testing::HttpConnection connection(server_.metrics_port());
    std::istringstream lines(connection.Send("GET", "/metrics").body);
    for (std::string line; std::getline(lines, line);) {
      bool match = model.empty() ? line.rfind(metric + " ", 0) == 0
                                 : line.rfind(metric + "{", 0) == 0 &&
                                       line.find("model=\"" + model + "\"") != std::string::npos;
      if (match) return std::stod(line.substr(line.rfind(' ') + 1));
    }
    return 0;
  }
  std::string Outputs(const ModelInferResponse& r) {
    std::string all;
    for (int i = 0; i < r.outputs_size(); ++i) {
      all += r.outputs(i).name() + ":" + r.outputs(i).datatype() + ":" + r.raw_output_contents(i) + ";";
    }
    return all;
  }
};

TEST_F(ResponseCacheTest, ARepeatedRequestIsAnsweredFromTheCacheOverBothProtocols) {
  StartServer({"--response-cache-bytes=1MiB", "--model-config=two_io:response_cache=true",
               "--model-control-mode=explicit", "--load-model=two_io"});
  ModelInferResponse computed, cached, typed;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &computed).ok());
  ASSERT_TRUE(Infer(TwoIoRequest(true), &cached).ok());
  // The same tensors in typed contents are the same request.
  ASSERT_TRUE(Infer(TwoIoRequest(false), &typed).ok());
  EXPECT_EQ(Outputs(cached), Outputs(computed));
  EXPECT_EQ(Outputs(typed), Outputs(computed));
  EXPECT_EQ(cached.id(), "request-7");  // the header is the request's own

  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply = http.Send("POST", "/v2/models/two_io/infer", kTwoIoJson);
  ASSERT_EQ(reply.status, 200) << reply.body;
  rapidjson::Document body;
  body.Parse(reply.body.c_str());
  ASSERT_TRUE(body.IsObject()) << reply.body;
  ASSERT_TRUE(body["outputs"].IsArray());
  EXPECT_GT(body["outputs"].Size(), 0u);

  // Another input is another entry: computed.
  ModelInferRequest other = TwoIoRequest(true);
  other.set_raw_input_contents(1, Raw(std::vector<int64_t>{10, 20, 30, 41}));
  ModelInferResponse different;
  ASSERT_TRUE(Infer(other, &different).ok());
  EXPECT_NE(Outputs(different), Outputs(computed));

  inference::ModelStatistics stats = Statistics("two_io");
  EXPECT_EQ(stats.inference_stats().cache_hit().count(), 3u);   // gRPC raw, typed, HTTP
  EXPECT_EQ(stats.inference_stats().cache_miss().count(), 2u);  // the first, the other
  EXPECT_GT(stats.inference_stats().cache_hit().ns(), 0u);
  EXPECT_EQ(stats.inference_stats().success().count(), 5u);     // hits are successes
  EXPECT_EQ(stats.execution_count(), 2u);                       // run only for the misses
  EXPECT_EQ(stats.inference_stats().queue().count(), 2u);
  EXPECT_EQ(Metric("manypy_cache_hits_total", "two_io"), 3);
  EXPECT_EQ(Metric("manypy_cache_misses_total", "two_io"), 2);
  EXPECT_EQ(Metric("manypy_cache_entries"), 2);
  EXPECT_GT(Metric("manypy_cache_bytes"), 0);
  EXPECT_EQ(Metric("manypy_cache_capacity_bytes"), 1 << 20);

  // The model's config says it caches; HTTP's statistics carry the counts too.
  grpc::ClientContext ctx;
  inference::ModelConfigRequest config_request;
  config_request.set_name("two_io");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&ctx, config_request, &config).ok());
  EXPECT_TRUE(config.config().response_cache().enable());
  reply = http.Send("GET", "/v2/models/two_io/stats");
  rapidjson::Document http_stats;
  http_stats.Parse(reply.body.c_str());
  ASSERT_TRUE(http_stats.IsObject()) << reply.body;
  EXPECT_EQ(http_stats["model_stats"][0]["inference_stats"]["cache_hit"]["count"].GetUint64(), 3u)
      << reply.body;
}

TEST_F(ResponseCacheTest, AReloadDropsTheOldVersionsEntries) {
  StartServer({"--response-cache-bytes=1MiB", "--model-config=two_io:response_cache=true",
               "--model-control-mode=explicit", "--load-model=two_io"});
  ModelInferResponse response;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &response).ok());
  ASSERT_TRUE(Infer(TwoIoRequest(true), &response).ok());
  EXPECT_EQ(Statistics("two_io").inference_stats().cache_hit().count(), 1u);
  EXPECT_EQ(Metric("manypy_cache_entries"), 1);

  ASSERT_TRUE(LoadModel("two_io").ok());  // the same version, loaded again
  EXPECT_EQ(Metric("manypy_cache_entries"), 0);  // dropped with the old load
  ASSERT_TRUE(Infer(TwoIoRequest(true), &response).ok());
  inference::ModelStatistics stats = Statistics("two_io");
  // Statistics continue across the reload: the new load computed its answer.
  EXPECT_EQ(stats.inference_stats().cache_hit().count(), 1u);
  EXPECT_EQ(stats.inference_stats().cache_miss().count(), 2u);
  EXPECT_EQ(stats.execution_count(), 2u);  // warm-up runs are not counted
  EXPECT_EQ(Metric("manypy_cache_entries"), 1);
}

TEST_F(ResponseCacheTest, AStreamingModelIsRefusedTheCache) {
  StartServer({std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/streaming",
               "--response-cache-bytes=1MiB", "--model-config=ticker:response_cache=true"});
  grpc::ClientContext ctx;
  inference::RepositoryIndexRequest request;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&ctx, request, &index).ok());
  bool found = false;
  for (const auto& m : index.models()) {
    if (m.name() != "ticker") continue;
    found = true;
    EXPECT_EQ(m.state(), "UNAVAILABLE");
    EXPECT_NE(m.reason().find("cannot be cached"), std::string::npos) << m.reason();
  }
  EXPECT_TRUE(found);
}

TEST_F(ResponseCacheTest, AModelWithoutTheSettingNeverReachesTheCache) {
  StartServer({"--response-cache-bytes=1MiB", "--model-control-mode=explicit",
               "--load-model=two_io"});
  ModelInferResponse first, second;
  ASSERT_TRUE(Infer(TwoIoRequest(true), &first).ok());
  ASSERT_TRUE(Infer(TwoIoRequest(true), &second).ok());
  inference::ModelStatistics stats = Statistics("two_io");
  EXPECT_EQ(stats.inference_stats().cache_hit().count(), 0u);
  EXPECT_EQ(stats.inference_stats().cache_miss().count(), 0u);
  EXPECT_EQ(stats.execution_count(), 2u);
  EXPECT_EQ(Metric("manypy_cache_entries"), 0);
}

TEST_F(ResponseCacheTest, ABadSettingIsRefusedAtStart) {
  testing::ServerProcess server;
  EXPECT_FALSE(server.Start(MANYPY_SERVER_BINARY,
                            {std::string("--model-repository=") + MANYPY_TEST_REPOSITORY,
                             "--model-config=two_io:response_cache=maybe"},
                            60));
}

}  // namespace
}  // namespace manypy
