// On-demand loading end to end (the real server, gRPC): 32 concurrent first
// requests share one load; metadata without a load; a refusal that names the
// budget; and the resident size falling back after a large model is evicted.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/resident_size.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

constexpr int kInFeatures = 256;  // tests/bench/many_models.py

ModelInferRequest Request(const std::string& model) {
  ModelInferRequest r;
  r.set_model_name(model);
  auto* in = r.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(kInFeatures);
  r.add_raw_input_contents(Raw(std::vector<float>(kInFeatures, 1.f)));
  return r;
}

class OnDemandE2eTest : public ServerTest {
 protected:
  // Small models (1 MiB of weights each; small_000 has a module of its own)
  // and one large one (big_000, 192 MiB), packaged once for every test.
  static void SetUpTestSuite() {
    char folder[] = "/tmp/manypy-on-demand-XXXXXX";
    ASSERT_NE(mkdtemp(folder), nullptr);
    dir_ = new std::string(folder);
    std::string make = std::string("/usr/bin/python3 ") + MANYPY_SOURCE_DIR +
                       "/tests/bench/many_models.py --out " + *dir_;
    ASSERT_EQ(std::system((make + " --count 3 --mb 1 --own-every 3 --prefix small >/dev/null").c_str()), 0);
    ASSERT_EQ(std::system((make + " --count 1 --mb 192 --own-every 0 --prefix big >/dev/null").c_str()), 0);
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (dir_ != nullptr) std::filesystem::remove_all(*dir_, ignored);
    delete dir_;
    dir_ = nullptr;
  }
  void Start(std::vector<std::string> extra) {
    extra.push_back("--model-repository=" + *dir_);
    extra.push_back("--model-control-mode=on-demand");
    StartServer(extra);
  }
  std::map<std::string, inference::RepositoryIndexResponse::ModelIndex> Index() {
    grpc::ClientContext ctx;
    inference::RepositoryIndexRequest request;
    inference::RepositoryIndexResponse response;
    EXPECT_TRUE(stub_->RepositoryIndex(&ctx, request, &response).ok());
    std::map<std::string, inference::RepositoryIndexResponse::ModelIndex> out;
    for (const auto& m : response.models()) out[m.name()] = m;
    return out;
  }

  /// The value of `metric` for `model` on /metrics (summed over its other labels; 0 if absent).
  double Metric(const std::string& metric, const std::string& model) {
    testing::HttpConnection connection(server_.metrics_port());
    std::istringstream lines(connection.Send("GET", "/metrics").body);
    double sum = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(metric + "{", 0) == 0 &&
          line.find("model=\"" + model + "\"") != std::string::npos) {
        sum += std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return sum;
  }

  static std::string* dir_;
};
std::string* OnDemandE2eTest::dir_ = nullptr;

TEST_F(OnDemandE2eTest, ThirtyTwoConcurrentFirstRequestsShareOneLoadAndAllSucceed) {
  Start({"--load-model=small_001"});
  auto index = Index();
  EXPECT_EQ(index["small_001"].state(), "READY");
  EXPECT_EQ(index["small_002"].state(), "UNAVAILABLE");
  EXPECT_EQ(index["small_002"].reason(), "not loaded; loads on first request");

  // Metadata and config from the manifest: small_002 stays unloaded.
  grpc::ClientContext mctx;
  inference::ModelMetadataRequest mreq;
  mreq.set_name("small_002");
  inference::ModelMetadataResponse meta;
  ASSERT_TRUE(stub_->ModelMetadata(&mctx, mreq, &meta).ok());
  EXPECT_EQ(meta.inputs(0).name(), "INPUT__0");
  EXPECT_EQ(Index()["small_002"].state(), "UNAVAILABLE");

  std::vector<grpc::Status> statuses(32);
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back([&, i] {
      ModelInferResponse response;
      statuses[i] = Infer(Request("small_002"), &response);
    });
  }
  for (auto& c : clients) c.join();
  for (const auto& s : statuses) EXPECT_TRUE(s.ok()) << s.error_message();
  index = Index();
  EXPECT_EQ(index["small_002"].state(), "READY");
  EXPECT_NE(index["small_002"].reason().find("memory "), std::string::npos) << index["small_002"].reason();
  inference::ModelStatistics stats = Statistics("small_002");
  ASSERT_EQ(stats.memory_usage_size(), 1);
  EXPECT_GT(stats.memory_usage(0).byte_size(), 1u << 20);  // its weights at least
  EXPECT_EQ(stats.inference_stats().success().count(), 32u);
  EXPECT_EQ(Metric("manypy_model_cold_loads_total", "small_002"), 1);
  EXPECT_GT(Metric("manypy_model_memory_bytes", "small_002"), 1 << 20);
}

TEST_F(OnDemandE2eTest, RefusesWithResourceExhaustedWhenOnlyPinnedModelsHoldTheBudget) {
  Start({"--load-model=small_001", "--max-loaded-models=1"});
  ModelInferResponse response;
  grpc::Status s = Infer(Request("small_002"), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("--max-loaded-models 1"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("small_001 v1"), std::string::npos) << s.error_message();
  EXPECT_TRUE(Infer(Request("small_001"), &response).ok());
}

TEST_F(OnDemandE2eTest, TheResidentSizeFallsBackWhenALargeModelIsEvicted) {
  Start({"--max-loaded-models=1"});
  ModelInferResponse response;
  ASSERT_TRUE(Infer(Request("small_001"), &response).ok());
  int64_t before = testing::ResidentBytes(server_.serving_pid());
  ASSERT_TRUE(Infer(Request("big_000"), &response).ok());
  int64_t with_big = testing::ResidentBytes(server_.serving_pid());
  ASSERT_TRUE(Infer(Request("small_002"), &response).ok());  // evicts big_000
  auto index = Index();
  EXPECT_EQ(index["big_000"].state(), "UNAVAILABLE");
  EXPECT_NE(index["big_000"].reason().find("evicted"), std::string::npos) << index["big_000"].reason();
  int64_t after = testing::ResidentBytes(server_.serving_pid());
  constexpr int64_t kBig = int64_t{192} << 20;
  std::cout << "resident: " << before / (1 << 20) << " MiB before, " << with_big / (1 << 20)
            << " MiB with big_000, " << after / (1 << 20) << " MiB after evicting it\n";
  EXPECT_GT(with_big - before, kBig * 9 / 10);  // its weights were resident once
  // Back within 10% of the big model's size of where it was (what stays is
  // the allocator's caches and small_002).
  EXPECT_LT(after - before, kBig / 10);
  EXPECT_EQ(Metric("manypy_model_evictions_total", "big_000"), 1);
  EXPECT_GT(Metric("manypy_model_evicted_bytes_total", "big_000"), kBig);
  EXPECT_EQ(Metric("manypy_model_memory_bytes", "big_000"), 0);  // its series went with it
}

}  // namespace
}  // namespace manypy
