// AOTInductor archives (platform torch_aoti) through the real server: batched
// requests answered with their own rows, a Python model calling one with
// manypy.infer, unload and reload, loading on demand and the response cache,
// system shared memory, statistics and /metrics, queued requests past their
// deadline, eviction under a memory budget and the reload after it, and the
// refusals. The refusal of an archive
// compiled under another PyTorch runs on every release (Debian 12's server has
// no AOTInductor loader and says so); the rest needs PyTorch >= 2.6.
#include <atomic>
#include <iostream>
#include <map>
#include <thread>

#include "tests/test_util/client_shm_region.h"
#include "tests/test_util/http_client.h"
#include "tests/test_util/metrics_scrape.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

#if MANYPY_WITH_AOTI
#define MANYPY_NEEDS_AOTI() (void)0
#else
#define MANYPY_NEEDS_AOTI() GTEST_SKIP() << "this server's libtorch has no AOTInductor loader"
#endif

const std::string kAoti = std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/aoti";
// Room for one of linear_1mib and double_sum_aoti, not both (the eviction
// case): measured on Debian 13, linear_1mib holds 1.16 MiB (its 1 MiB of
// weights once, 161.5 KiB of Python over 2 interpreters) and double_sum_aoti
// 314.6 KiB (its archive, its estimate before a load, 401 KiB); the budget
// sits about midway between 1.16 and their sum, 1.47 MiB.
const char* const kBudget = "1360KiB";
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

// The repository index by model name.
std::map<std::string, inference::RepositoryIndexResponse::ModelIndex> Index(
    GRPCInferenceService::Stub& stub) {
  grpc::ClientContext ctx;
  inference::RepositoryIndexResponse response;
  EXPECT_TRUE(stub.RepositoryIndex(&ctx, inference::RepositoryIndexRequest(), &response).ok());
  std::map<std::string, inference::RepositoryIndexResponse::ModelIndex> out;
  for (const auto& m : response.models()) out[m.name()] = m;
  return out;
}

grpc::Status RegisterRegion(GRPCInferenceService::Stub& stub, const std::string& name,
                            const std::string& key, uint64_t byte_size) {
  grpc::ClientContext ctx;
  inference::SystemSharedMemoryRegisterRequest request;
  request.set_name(name);
  request.set_key(key);
  request.set_byte_size(byte_size);
  inference::SystemSharedMemoryRegisterResponse response;
  return stub.SystemSharedMemoryRegister(&ctx, request, &response);
}

TEST_F(ServerTest, AotiModelReadsItsInputFromAndWritesItsOutputsToTheClientsSharedMemory) {
  MANYPY_NEEDS_AOTI();
  StartServer({"--allow-client-shm", "--model-control-mode=explicit",
               "--load-model=double_sum_aoti", kAoti});
  testing::ClientRegion in("aoti_in", 24), out("aoti_out", 32);
  in.Write(0, std::vector<float>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(RegisterRegion(*stub_, "in", in.key(), 24).ok());
  ASSERT_TRUE(RegisterRegion(*stub_, "out", out.key(), 32).ok());
  // X [2, 3] from "in"; DOUBLE [2, 3] to "out" at 0, SUM [2, 1] after it.
  ModelInferRequest r = RowsRequest("double_sum_aoti", {}, 2);
  r.clear_raw_input_contents();
  testing::SetRegion(r.mutable_inputs(0)->mutable_parameters(), "in", 24);
  auto* doubled = r.add_outputs();
  doubled->set_name("DOUBLE");
  testing::SetRegion(doubled->mutable_parameters(), "out", 24, 0);
  auto* sum = r.add_outputs();
  sum->set_name("SUM");
  testing::SetRegion(sum->mutable_parameters(), "out", 8, 24);

  ModelInferResponse response;
  grpc::Status s = Infer(r, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.Read<float>(0, 6), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(out.Read<float>(24, 2), (std::vector<float>{6, 15}));
  ASSERT_EQ(response.outputs_size(), 2) << response.DebugString();
  EXPECT_EQ(response.outputs(1).name(), "SUM");
  const auto& shape = response.outputs(1).shape();
  EXPECT_EQ(std::vector<int64_t>(shape.begin(), shape.end()), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(response.outputs(1).parameters().at("shared_memory_offset").int64_param(), 24);
  for (const auto& raw : response.raw_output_contents()) EXPECT_TRUE(raw.empty());
}

TEST_F(ServerTest, AotiRequestsAreCountedInStatisticsAndOnMetrics) {
  MANYPY_NEEDS_AOTI();
  StartServer({"--model-control-mode=explicit", "--load-model=double_sum_aoti", kAoti});
  const int n = 5;
  for (int i = 0; i < n; ++i) {  // one at a time: an execution each
    ModelInferResponse out;
    grpc::Status s = Infer(RowsRequest("double_sum_aoti", {float(i), 1, 2}, 1), &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(1)), (std::vector<float>{float(i) + 3}));
  }
  // A request the model cannot take (4 features, not 3): refused before it
  // runs, counted once as a failure.
  ModelInferResponse refused;
  grpc::Status bad = Infer(RowsRequest("double_sum_aoti", {1, 2, 3, 4}, 1), &refused);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.error_message();

  inference::ModelStatistics stats = Statistics("double_sum_aoti");
  EXPECT_EQ(stats.inference_stats().success().count(), static_cast<uint64_t>(n));
  EXPECT_GT(stats.inference_stats().success().ns(), 0u);
  EXPECT_EQ(stats.inference_stats().compute_infer().count(), static_cast<uint64_t>(n));
  EXPECT_GT(stats.inference_stats().compute_infer().ns(), 0u);
  EXPECT_EQ(stats.inference_stats().fail().count(), 1u);
  EXPECT_EQ(stats.inference_count(), static_cast<uint64_t>(n));
  EXPECT_EQ(stats.execution_count(), static_cast<uint64_t>(n));
  EXPECT_GT(stats.last_inference(), 0u);

  const int port = server_.metrics_port();
  EXPECT_EQ(testing::MetricValueOnce(port, "manypy_requests_total", "double_sum_aoti",
                                     "outcome=\"success\"", n), n);
  EXPECT_EQ(testing::MetricValueOnce(port, "manypy_requests_total", "double_sum_aoti",
                                     "outcome=\"invalid_argument\"", 1), 1);
  EXPECT_EQ(testing::MetricValueOnce(port, "manypy_executions_total", "double_sum_aoti", "", n), n);
}

TEST_F(ServerTest, AotiRequestsQueuedPastTheirDeadlineAreAnsweredDeadlineExceededAndNotRun) {
  MANYPY_NEEDS_AOTI();
  // One interpreter, so one worker: while slow's Python call holds it, the
  // AOTI model's requests can only queue. Its own queue timeout is 300 ms.
  StartServer({"--model-control-mode=explicit", "--load-model=double_sum_aoti",
               "--load-model=slow", "--interpreters=1",
               "--model-config=double_sum_aoti:default_timeout_microseconds=300000", kAoti});
  ModelInferResponse first;
  ASSERT_TRUE(Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &first).ok());
  grpc::Status slow_status;
  std::thread holder([&] {
    ModelInferResponse out;
    slow_status = Infer(SlowRequest(2500), &out);
  });
  // Until slow's call runs on the one worker.
  ASSERT_EQ(testing::MetricValueOnce(server_.metrics_port(),
                                     "manypy_interpreter_in_flight_executions", "", "", 1), 1);

  // The model's default timeout (the client would wait 30 s).
  ModelInferResponse out;
  grpc::Status s = Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_NE(s.error_message().find("in its queue; it was not run"), std::string::npos)
      << s.error_message();
  // The client's deadline, over HTTP (`timeout`, microseconds): shorter than
  // the model's, so it is the one that passes.
  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply = http.Send(
      "POST", "/v2/models/double_sum_aoti/infer",
      R"({"inputs":[{"name":"X","datatype":"FP32","shape":[1,3],"data":[1,2,3]}],)"
      R"("parameters":{"timeout":100000}})");
  EXPECT_EQ(reply.status, 504) << reply.body;
  EXPECT_NE(reply.body.find("in its queue; it was not run"), std::string::npos) << reply.body;
  // And over gRPC: the client stops waiting at 100 ms; the server, whose copy
  // of the deadline passes at the same time, counts it as such.
  s = Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &out, 100);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();

  holder.join();
  EXPECT_TRUE(slow_status.ok()) << slow_status.error_message();
  EXPECT_EQ(testing::MetricValueOnce(server_.metrics_port(), "manypy_requests_total",
                                     "double_sum_aoti", "outcome=\"deadline_exceeded\"", 3), 3);
  inference::ModelStatistics stats = Statistics("double_sum_aoti");
  EXPECT_EQ(stats.inference_stats().fail().count(), 3u);
  EXPECT_EQ(stats.execution_count(), 1u);  // the first request only: none of the three ran
  // The worker free again, the model answers.
  s = Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
}

TEST_F(ServerTest, AotiModelIdleUnderAMemoryBudgetIsEvictedAndReloadsOnItsNextRequest) {
  MANYPY_NEEDS_AOTI();
  const std::string budget = std::string("--model-memory-budget=") + kBudget;
  StartServer({"--model-control-mode=on-demand", budget, kAoti});
  ModelInferResponse out;
  grpc::Status s = Infer(RowsRequest("double_sum_aoti", {1, 2, 3}, 1), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  // What the load holds, counted: its compiled shared object, weights included.
  const uint64_t bytes = Statistics("double_sum_aoti").memory_usage(0).byte_size();
  EXPECT_GT(bytes, 0u);
  const int port = server_.metrics_port();
  EXPECT_EQ(testing::MetricValue(port, "manypy_model_memory_bytes", "double_sum_aoti"), bytes);
  auto index = Index(*stub_);
  EXPECT_EQ(index["double_sum_aoti"].state(), "READY");
  EXPECT_EQ(index["double_sum_aoti"].reason().find("memory 0 B"), std::string::npos)
      << index["double_sum_aoti"].reason();

  ModelInferRequest linear;
  linear.set_model_name("linear_1mib");
  auto* in = linear.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(512);
  linear.add_raw_input_contents(Raw(std::vector<float>(512, 1.f)));
  s = Infer(linear, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  index = Index(*stub_);
  std::cout << "double_sum_aoti held " << bytes << " bytes; linear_1mib: "
            << index["linear_1mib"].reason() << "\n";
  EXPECT_EQ(index["linear_1mib"].state(), "READY");
  EXPECT_EQ(index["double_sum_aoti"].state(), "UNAVAILABLE");
  EXPECT_NE(index["double_sum_aoti"].reason().find("evicted"), std::string::npos)
      << index["double_sum_aoti"].reason();
  EXPECT_EQ(testing::MetricValue(port, "manypy_model_evictions_total", "double_sum_aoti"), 1);
  EXPECT_EQ(testing::MetricValue(port, "manypy_model_evicted_bytes_total", "double_sum_aoti"),
            bytes);
  EXPECT_EQ(testing::MetricValue(port, "manypy_model_memory_bytes", "double_sum_aoti"), 0);

  // Its next request loads it again (and evicts linear_1mib for it).
  s = Infer(RowsRequest("double_sum_aoti", {4, 5, 6}, 1), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(1)), (std::vector<float>{15}));
  index = Index(*stub_);
  EXPECT_EQ(index["double_sum_aoti"].state(), "READY");
  EXPECT_EQ(index["linear_1mib"].state(), "UNAVAILABLE");
  EXPECT_EQ(testing::MetricValue(port, "manypy_model_cold_loads_total", "double_sum_aoti"), 2);
  EXPECT_EQ(testing::MetricValue(port, "manypy_model_memory_bytes", "double_sum_aoti"), bytes);
}

}  // namespace
}  // namespace manypy
