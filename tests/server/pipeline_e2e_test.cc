// End-to-end tests of the request path's limits through the real server:
// dynamic batching, bounded queues, deadlines, execution limits that stop
// Python, isolation of a stuck model, and a shutdown that always ends.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <thread>

#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

ModelInferRequest FloatRequest(const std::string& model, const std::string& input,
                               std::vector<float> values, std::vector<int64_t> shape) {
  ModelInferRequest r;
  r.set_model_name(model);
  auto* in = r.add_inputs();
  in->set_name(input);
  in->set_datatype("FP32");
  for (int64_t d : shape) in->add_shape(d);
  r.add_raw_input_contents(Raw(values));
  return r;
}

ModelInferRequest SpinRequest(float value) { return FloatRequest("spin", "INPUT__0", {value}, {1}); }


// Runs `client(i)` for i in [0, n) on n threads at once; returns how many
// succeeded (failures are reported as test failures).
int OnConcurrentClients(int n, const std::function<::testing::AssertionResult(int)>& client) {
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < n; ++i) {
    clients.emplace_back([&, i] {
      ::testing::AssertionResult r = client(i);
      EXPECT_TRUE(r);
      if (r) ok++;
    });
  }
  for (auto& c : clients) c.join();
  return ok.load();
}

TEST_F(ServerTest, BatchesFormAndEveryRequestGetsItsOwnOutput) {
  StartServer({"--model-control-mode=explicit", "--load-model=batched_double"});
  const int n = 64;
  int ok = OnConcurrentClients(n, [&](int i) {
    float v = static_cast<float>(i);
    ModelInferResponse out;
    grpc::Status s = Infer(FloatRequest("batched_double", "X", {v, -v}, {1, 2}), &out);
    if (!s.ok()) return ::testing::AssertionFailure() << s.error_message();
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{2 * v, -2 * v}));
    EXPECT_EQ(out.outputs(0).shape(0), 1);
    return ::testing::AssertionSuccess();
  });
  EXPECT_EQ(ok, n);
  auto stats = Statistics("batched_double");
  EXPECT_EQ(stats.inference_count(), static_cast<uint64_t>(n));
  EXPECT_LT(stats.execution_count(), static_cast<uint64_t>(n) / 2) << "batches did not form";
  EXPECT_EQ(stats.inference_stats().success().count(), static_cast<uint64_t>(n));
}

TEST_F(ServerTest, TorchScriptModelIsBatchedAndAnswersEveryRequestWithItsOwnOutputs) {
  StartServer({"--model-control-mode=explicit", "--load-model=double_sum_ts"});
  const int n = 48;
  int ok = OnConcurrentClients(n, [&](int i) {
    float v = static_cast<float>(i);
    ModelInferResponse out;
    grpc::Status s = Infer(FloatRequest("double_sum_ts", "X", {v, v + 1, -v}, {1, 3}), &out);
    if (!s.ok()) return ::testing::AssertionFailure() << s.error_message();
    if (out.outputs_size() != 2) return ::testing::AssertionFailure() << out.DebugString();
    EXPECT_EQ(out.outputs(0).name(), "DOUBLE");
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)),
              (std::vector<float>{2 * v, 2 * v + 2, -2 * v}));
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(1)), std::vector<float>{v + 1});
    return ::testing::AssertionSuccess();
  });
  EXPECT_EQ(ok, n);
  auto stats = Statistics("double_sum_ts");
  EXPECT_EQ(stats.inference_count(), static_cast<uint64_t>(n));
  EXPECT_LE(stats.execution_count(), stats.inference_count());

  grpc::ClientContext ctx;
  inference::ModelConfigRequest request;
  request.set_name("double_sum_ts");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&ctx, request, &config).ok());
  EXPECT_EQ(config.config().platform(), "torchscript");
  EXPECT_EQ(config.config().max_batch_size(), 16);
}

TEST_F(ServerTest, TorchScriptModelErrorIsInternalAndTheModelServesOn) {
  StartServer({"--model-control-mode=explicit", "--load-model=failing_ts"});
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("failing_ts", "INPUT__0", {1, -1}, {2}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(s.error_message().find("model 'failing_ts'"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("negative input is not allowed"), std::string::npos)
      << s.error_message();
  ASSERT_TRUE(Infer(FloatRequest("failing_ts", "INPUT__0", {1, 2}, {2}), &out).ok());
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{2, 4}));
}

TEST_F(ServerTest, FullQueueIsRefusedWithResourceExhaustedNamingModelAndLimit) {
  StartServer({"--model-control-mode=explicit", "--load-model=slow",
               "--model-config=slow:instance_count=1", "--model-config=slow:max_queue_size=2"});
  std::vector<std::thread> clients;
  std::atomic<int> ok{0}, exhausted{0};
  std::string message;
  std::mutex mu;
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&] {
      ModelInferResponse out;
      grpc::Status s = Infer(SlowRequest(300), &out);
      if (s.ok()) ok++;
      if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        exhausted++;
        std::lock_guard<std::mutex> lock(mu);
        message = s.error_message();
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_GE(exhausted.load(), 1);
  EXPECT_EQ(ok.load() + exhausted.load(), 6);
  EXPECT_NE(message.find("'slow'"), std::string::npos) << message;
  EXPECT_NE(message.find("max_queue_size 2"), std::string::npos) << message;
}

TEST_F(ServerTest, StuckModelIsInterruptedAndItsInterpreterServesTheNextRequest) {
  StartServer({"--model-control-mode=explicit", "--load-model=spin", "--interpreters=1",
               "--model-config=spin:max_execution_seconds=1"});
  Clock::time_point start = Clock::now();
  ModelInferResponse out;
  grpc::Status s = Infer(SpinRequest(-1), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  EXPECT_NE(s.error_message().find("execution limit of 1 s"), std::string::npos) << s.error_message();
  EXPECT_LT(Clock::now() - start, 10s);
  ModelInferResponse next;
  ASSERT_TRUE(Infer(SpinRequest(21), &next).ok());  // the only interpreter, free again
  EXPECT_EQ(FromRaw<float>(next.raw_output_contents(0)), std::vector<float>{42});
}

TEST_F(ServerTest, TwoModelsProgressWhileAThirdIsStuck) {
  StartServer({"--model-control-mode=explicit", "--load-model=spin", "--load-model=two_io",
               "--load-model=failing", "--model-config=spin:instance_count=1",
               "--model-config=spin:max_execution_seconds=0", "--grace-period=2"});
  std::thread stuck([&] {
    // Its client waits on (one that gave up would have the call interrupted):
    // Python spins until the shutdown abandons it.
    ModelInferResponse out;
    grpc::Status s = Infer(SpinRequest(-1), &out, 60000);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  });
  std::this_thread::sleep_for(300ms);
  std::atomic<int> two_io{0}, failing{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 25; ++i) {
        ModelInferResponse out;
        if (c % 2 == 0) {
          if (Infer(TwoIoRequest(true), &out, 5000).ok()) two_io++;
        } else if (Infer(FloatRequest("failing", "INPUT__0", {1, 2}, {2}), &out, 5000).ok()) {
          failing++;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(two_io.load(), 50);
  EXPECT_EQ(failing.load(), 50);
  // Shutdown with the stuck call still running: abandoned, non-zero exit.
  Clock::time_point stop = Clock::now();
  EXPECT_EQ(server_.Stop(), 1);
  EXPECT_LT(Clock::now() - stop, 7s);
  stuck.join();
}

TEST_F(ServerTest, SigtermWithAStuckModelExitsWithinGracePlusFiveSeconds) {
  StartServer({"--model-control-mode=explicit", "--load-model=spin", "--grace-period=2",
               "--model-config=spin:max_execution_seconds=0"});
  std::thread stuck([&] {
    ModelInferResponse out;
    grpc::Status s = Infer(SpinRequest(-1), &out, 60000);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  });
  std::this_thread::sleep_for(500ms);
  Clock::time_point stop = Clock::now();
  EXPECT_EQ(server_.Stop(), 1);  // it had to abandon stuck work
  EXPECT_LT(Clock::now() - stop, 7s);
  stuck.join();
}

TEST_F(ServerTest, ModelConfigReportsSettingsAndDefaultTimeoutExpiresQueuedRequests) {
  StartServer({"--model-control-mode=explicit", "--load-model=slow", "--interpreters=1",
               "--model-config=slow:default_timeout_microseconds=200000",
               "--model-config=slow:instance_count=1"});
  grpc::ClientContext ctx;
  inference::ModelConfigRequest request;
  request.set_name("slow");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&ctx, request, &config).ok());
  EXPECT_EQ(config.config().instance_group(0).count(), 1);
  std::thread busy([&] {
    ModelInferResponse out;
    EXPECT_TRUE(Infer(SlowRequest(150), &out).ok());  // runs within the 200 ms default
  });
  std::this_thread::sleep_for(50ms);
  ModelInferResponse out;  // queued behind it, no deadline of its own: the model's default applies
  grpc::Status s = Infer(SlowRequest(1), &out);
  busy.join();
  EXPECT_TRUE(s.ok() || s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  std::thread busy2([&] {
    ModelInferResponse o;
    EXPECT_EQ(Infer(SlowRequest(600), &o).error_code(), grpc::StatusCode::OK);
  });
  std::this_thread::sleep_for(50ms);
  grpc::Status late = Infer(SlowRequest(1), &out);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << late.error_message();
  busy2.join();
}

TEST_F(ServerTest, ModelAskingForCudaOnACpuOnlyLibtorchFailsToLoadWithItsReason) {
  StartServer({"--model-control-mode=explicit",
               std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/cuda"});
  grpc::ClientContext load_ctx;
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("needs_cuda");
  inference::RepositoryModelLoadResponse loaded;
  grpc::Status s = stub_->RepositoryModelLoad(&load_ctx, load, &loaded);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("without CUDA"), std::string::npos) << s.error_message();
  grpc::ClientContext index_ctx;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&index_ctx, inference::RepositoryIndexRequest(), &index).ok());
  ASSERT_EQ(index.models_size(), 1);
  EXPECT_EQ(index.models(0).state(), "UNAVAILABLE");
  EXPECT_NE(index.models(0).reason().find("device 'cuda'"), std::string::npos)
      << index.models(0).reason();
}

TEST_F(ServerTest, ArchiveNeedingAModuleTheServerLacksFailsAtStartupNamingIt) {
  // Default model-control mode: every archive loads at startup, before any request.
  StartServer({std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/missing_module"});
  grpc::ClientContext index_ctx;
  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(stub_->RepositoryIndex(&index_ctx, inference::RepositoryIndexRequest(), &index).ok());
  ASSERT_EQ(index.models_size(), 1);
  EXPECT_EQ(index.models(0).name(), "needs_missing_module");
  EXPECT_EQ(index.models(0).state(), "UNAVAILABLE");
  EXPECT_NE(index.models(0).reason().find("cannot import: manypy_test_installed_lib"),
            std::string::npos)
      << index.models(0).reason();
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("needs_missing_module", "INPUT__0", {1.0f}, {1}), &out);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
}

TEST_F(ServerTest, NoneInADeclaredOutputIsAModelErrorNamingIt) {
  // sometimes_none returns (x * 2, None) for the export's example, so its
  // manifest declares OUTPUT__0 only; for negative inputs it returns (None, x).
  StartServer({std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/none_output"});
  ModelInferResponse out;
  grpc::Status ok = Infer(FloatRequest("sometimes_none", "INPUT__0", {1.0f, 2.0f}, {2}), &out);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  ASSERT_EQ(out.outputs_size(), 1);
  EXPECT_EQ(out.outputs(0).name(), "OUTPUT__0");
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{2.0f, 4.0f}));
  ModelInferResponse bad;
  grpc::Status s = Infer(FloatRequest("sometimes_none", "INPUT__0", {-1.0f}, {1}), &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  EXPECT_NE(s.error_message().find("output 'OUTPUT__0' is None"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("sometimes_none"), std::string::npos) << s.error_message();
}

}  // namespace
}  // namespace manypy
