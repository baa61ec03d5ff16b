// AOTInductor archives (platform torch_aoti) through the real server: batched
// requests answered with their own rows, a Python model calling one with
// manypy.infer, unload and reload, loading on demand and the response cache,
// and the refusals. The refusal of an archive
// compiled under another PyTorch runs on every release (Debian 12's server has
// no AOTInductor loader and says so); the rest needs PyTorch >= 2.6.
#include <atomic>
#include <thread>

#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

#if MANYPY_WITH_AOTI
#define MANYPY_NEEDS_AOTI() (void)0
#else
#define MANYPY_NEEDS_AOTI() GTEST_SKIP() << "this server's libtorch has no AOTInductor loader"
#endif

const std::string kAoti = std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/aoti";
const std::string kRefused =
    std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/aoti_refused";

ModelInferRequest RowsRequest(const std::string& model, const std::vector<float>& values,
                              int64_t rows) {
  ModelInferRequest r;
  r.set_model_name(model);
  auto* in = r.add_inputs();
  in->set_name("X");
  in->set_datatype("FP32");
  in->add_shape(rows);
  in->add_shape(3);
  r.add_raw_input_contents(Raw(values));
  return r;
}

TEST_F(ServerTest, AotiModelIsBatchedAndAnswersEveryRequestWithItsOwnRows) {
  MANYPY_NEEDS_AOTI();
  StartServer({"--model-control-mode=explicit", "--load-model=double_sum_aoti", kAoti});
  const int n = 48;
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      const float v = static_cast<float>(i);
      const int64_t rows = 1 + i % 3;  // requests of 1 to 3 rows joined into batches
      std::vector<float> x;
      for (int64_t r = 0; r < rows; ++r) x.insert(x.end(), {v + r, v + 1, -v});
      ModelInferResponse out;
      grpc::Status s = Infer(RowsRequest("double_sum_aoti", x, rows), &out);
      ASSERT_TRUE(s.ok()) << s.error_message();
      ASSERT_EQ(out.outputs_size(), 2) << out.DebugString();
      EXPECT_EQ(out.outputs(0).name(), "DOUBLE");
      EXPECT_EQ(out.outputs(0).shape(0), rows);
      std::vector<float> doubled, sums;
      for (int64_t r = 0; r < rows; ++r) {
        doubled.insert(doubled.end(), {2 * (v + r), 2 * v + 2, -2 * v});
        sums.push_back(v + r + 1);
      }
      EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), doubled);
      EXPECT_EQ(FromRaw<float>(out.raw_output_contents(1)), sums);
      ok++;
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), n);
  auto stats = Statistics("double_sum_aoti");
  EXPECT_EQ(stats.inference_stats().success().count(), static_cast<uint64_t>(n));
  EXPECT_LE(stats.execution_count(), static_cast<uint64_t>(n));

  grpc::ClientContext ctx;
  inference::ModelConfigRequest request;
  request.set_name("double_sum_aoti");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&ctx, request, &config).ok());
  EXPECT_EQ(config.config().platform(), "torch_aoti");
  EXPECT_EQ(config.config().max_batch_size(), 16);
}

TEST_F(ServerTest, PythonModelCallsAnAotiModelAndItReloads) {
  MANYPY_NEEDS_AOTI();
  StartServer({"--model-control-mode=explicit", "--load-model=double_sum_aoti",
               "--load-model=calls_aoti", kAoti});
  for (int round = 0; round < 2; ++round) {
    ModelInferResponse out;
    grpc::Status s = Infer(RowsRequest("calls_aoti", {1, 2, 3, 4, 5, 6}, 2), &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{7, 16}));
    // Unloaded, then loaded again from its archive: a fresh set of runners.
    ASSERT_TRUE(UnloadModel("double_sum_aoti").ok());
    ASSERT_TRUE(LoadModel("double_sum_aoti").ok());
  }
}

TEST_F(ServerTest, AotiModelLoadsOnDemandAndARepeatedRequestComesFromTheCache) {
  MANYPY_NEEDS_AOTI();
  StartServer({"--model-control-mode=on-demand", "--response-cache-bytes=1MiB",
               "--model-config=double_sum_aoti:response_cache=true", kAoti});
  ModelInferResponse computed, cached;
  // Not loaded yet: the first request loads it, as for any platform.
  grpc::Status s = Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &computed);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &cached);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(cached.raw_output_contents_size(), 2);
  EXPECT_EQ(FromRaw<float>(cached.raw_output_contents(0)), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(cached.raw_output_contents(1), computed.raw_output_contents(1));
  auto stats = Statistics("double_sum_aoti");
  EXPECT_EQ(stats.inference_stats().cache_hit().count(), 1u);
  EXPECT_EQ(stats.inference_stats().cache_miss().count(), 1u);
  EXPECT_EQ(stats.execution_count(), 1u);  // the model ran once
}

TEST_F(ServerTest, AotiArchiveFromAnotherTorchIsRefusedNamingBothVersions) {
  StartServer({"--model-control-mode=explicit", kRefused});
  grpc::Status s = LoadModel("compiled_by_2_5_1");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("PyTorch 2.5.1"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("this server runs PyTorch "), std::string::npos)
      << s.error_message();
#if !MANYPY_WITH_AOTI
  EXPECT_NE(s.error_message().find("no AOTInductor package loader"), std::string::npos)
      << s.error_message();
#endif
}

TEST_F(ServerTest, AotiPackageTheLoaderCannotReadIsRefusedAtLoad) {
  MANYPY_NEEDS_AOTI();
  StartServer({"--model-control-mode=explicit", kRefused});
  grpc::Status s = LoadModel("not_a_package");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("the AOTInductor package is not a zip"), std::string::npos)
      << s.error_message();
}

}  // namespace
}  // namespace manypy
