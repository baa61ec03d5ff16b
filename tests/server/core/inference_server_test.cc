// InferenceServer, the service every frontend calls, with fake models (no
// Python, no sockets): inference in the protocol's messages, refusals counted
// once, repository changes off the caller's thread and only in explicit mode,
// metadata, config, statistics, index and readiness.
#include "server/core/inference_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "tests/test_util/fake_loader.h"
#include "tests/test_util/test_archives.h"

namespace manypy {
namespace {

using namespace std::chrono_literals;
using testing::FakeLoader;
using testing::TestManifest;

/// One request for `model`: IN of shape [1, 2] as raw FP32.
inference::ModelInferRequest Wire(const std::string& model, float a, float b) {
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id("req-1");
  auto* in = r.add_inputs();
  in->set_name("IN");
  in->set_datatype("FP32");
  in->add_shape(1);
  in->add_shape(2);
  float values[2] = {a, b};
  r.add_raw_input_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  return r;
}

/// A completion callback's status and the thread it ran on.
struct Completion {
  std::promise<std::pair<Status, std::thread::id>> promise;
  std::function<void(const Status&)> Callback() {
    return [this](const Status& s) { promise.set_value({s, std::this_thread::get_id()}); };
  }
  std::pair<Status, std::thread::id> Wait() {
    auto future = promise.get_future();
    if (future.wait_for(20s) != std::future_status::ready) {
      ADD_FAILURE() << "never completed";
      return {Internal("never completed"), {}};
    }
    return future.get();
  }
};

class InferenceServerTest : public ::testing::Test {
 protected:
  void WriteArchive(const std::string& file, const Manifest& m) {
    testing::WriteTestArchive(dir_, file, m);
  }

  void Start(bool explicit_control, std::vector<std::string> startup = {}) {
    dispatcher_ = std::make_unique<Dispatcher>(Dispatcher::Options{2});
    ModelManager::Options options;
    options.repository = dir_.path();
    options.loader = loader_.AsLoader();
    options.interpreters = 2;
    options.explicit_control = explicit_control;
    options.startup_models = std::move(startup);
    auto created = ModelManager::Create(nullptr, dispatcher_.get(), std::move(options));
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    manager_ = std::move(*created);
    server_ = std::make_unique<InferenceServer>(
        manager_.get(), dispatcher_.get(), InferenceServer::Options{explicit_control, AccessTokens(), {}});
  }

  Status Infer(const inference::ModelInferRequest& wire, inference::ModelInferResponse* out) {
    Completion done;
    server_->Infer(&wire, out, {}, done.Callback());
    return done.Wait().first;
  }

  testing::TempDir dir_;
  FakeLoader loader_;
  // Destroyed in reverse order: the server, the manager, then the dispatcher.
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<ModelManager> manager_;
  std::unique_ptr<InferenceServer> server_;
};

TEST_F(InferenceServerTest, InfersInTheProtocolsMessagesAndCountsTheRequest) {
  WriteArchive("alpha.mpk", TestManifest("alpha", 3));
  Start(false);
  inference::ModelInferRequest wire = Wire("alpha", 1, 2);
  inference::ModelInferResponse out;
  Status s = Infer(wire, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(out.model_name(), "alpha");
  EXPECT_EQ(out.model_version(), "3");
  EXPECT_EQ(out.id(), "req-1");
  ASSERT_EQ(out.raw_output_contents_size(), 1);
  float values[2];
  ASSERT_EQ(out.raw_output_contents(0).size(), sizeof(values));
  memcpy(values, out.raw_output_contents(0).data(), sizeof(values));
  EXPECT_EQ(values[0], 30);  // the fake of version 3 multiplies by 30
  EXPECT_EQ(values[1], 60);

  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(server_->ModelStatistics("alpha", "", &stats).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 1u);

  // A request that does not fit the signature is refused and counted.
  inference::ModelInferRequest bad = wire;
  bad.mutable_inputs(0)->set_name("NOPE");
  EXPECT_EQ(Infer(bad, &out).code(), StatusCode::kInvalidArgument);
  // So is one for a model that does not exist.
  EXPECT_EQ(Infer(Wire("gamma", 1, 2), &out).code(), StatusCode::kNotFound);
  stats.Clear();
  ASSERT_TRUE(server_->ModelStatistics("alpha", "", &stats).ok());
  EXPECT_EQ(stats.model_stats(0).inference_stats().fail().count(), 1u);
}

TEST_F(InferenceServerTest, RequestsAFrontendCouldNotDecodeAreCountedOnce) {
  WriteArchive("alpha.mpk", TestManifest("alpha", 1));
  Start(false);
  Completion refused;
  server_->Refuse("alpha", "", InvalidArgument("the body is not JSON"), refused.Callback());
  auto [status, thread] = refused.Wait();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "the body is not JSON");
  EXPECT_EQ(thread, std::this_thread::get_id());  // answered at once
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(server_->ModelStatistics("alpha", "", &stats).ok());
  EXPECT_EQ(stats.model_stats(0).inference_stats().fail().count(), 1u);
  // For a model that is not loaded: answered all the same.
  Completion unrouted;
  server_->Refuse("gamma", "", InvalidArgument("the body is not JSON"), unrouted.Callback());
  EXPECT_EQ(unrouted.Wait().first.code(), StatusCode::kInvalidArgument);
}

TEST_F(InferenceServerTest, RepositoryChangesRunOffTheCallersThreadOnlyInExplicitMode) {
  WriteArchive("a.mpk", TestManifest("a", 1));
  WriteArchive("b.mpk", TestManifest("b", 1));
  Start(true, {"a"});
  EXPECT_EQ(server_->ModelReady("b", "").code(), StatusCode::kNotFound);

  Completion load;
  server_->LoadModel("b", {}, load.Callback());
  auto [loaded, load_thread] = load.Wait();
  EXPECT_TRUE(loaded.ok()) << loaded.ToString();
  EXPECT_NE(load_thread, std::this_thread::get_id());  // on the manager's repository thread
  EXPECT_TRUE(server_->ModelReady("b", "").ok());

  Completion refused;
  server_->LoadModel("b", {"config"}, refused.Callback());
  Status s = refused.Wait().first;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("load parameter 'config' is refused"), std::string::npos) << s.message();

  Completion unload;
  server_->UnloadModel("b", unload.Callback());
  auto [unloaded, unload_thread] = unload.Wait();
  EXPECT_TRUE(unloaded.ok()) << unloaded.ToString();
  EXPECT_EQ(unload_thread, load_thread);  // the same thread, one change at a time
  EXPECT_EQ(server_->ModelReady("b", "").code(), StatusCode::kUnavailable);

  Completion path;
  server_->LoadModel("../etc/passwd", {}, path.Callback());
  EXPECT_EQ(path.Wait().first.code(), StatusCode::kInvalidArgument);
}

TEST_F(InferenceServerTest, OutsideExplicitModeRepositoryChangesAreRefusedAtOnce) {
  WriteArchive("a.mpk", TestManifest("a", 1));
  Start(false);
  Completion load;
  server_->LoadModel("a", {}, load.Callback());
  auto [s, thread] = load.Wait();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("--model-control-mode=explicit"), std::string::npos) << s.message();
  EXPECT_EQ(thread, std::this_thread::get_id());
  Completion unload;
  server_->UnloadModel("a", unload.Callback());
  EXPECT_EQ(unload.Wait().first.code(), StatusCode::kUnavailable);
  EXPECT_TRUE(server_->ModelReady("a", "").ok());  // still serving
}

TEST_F(InferenceServerTest, MetadataConfigIndexAndReadiness) {
  WriteArchive("a.mpk", TestManifest("a", 2));
  WriteArchive("b.mpk", TestManifest("b", 1));
  Start(true, {"a"});

  inference::ServerMetadataResponse server;
  server_->ServerMetadata(&server);
  EXPECT_EQ(server.name(), "manypy");

  inference::ModelMetadataResponse meta;
  ASSERT_TRUE(server_->ModelMetadata("a", "", &meta).ok());
  EXPECT_EQ(meta.name(), "a");
  ASSERT_EQ(meta.inputs_size(), 1);
  EXPECT_EQ(meta.inputs(0).name(), "IN");
  EXPECT_EQ(meta.inputs(0).shape_size(), 2);  // the batch dimension, then 2
  EXPECT_EQ(server_->ModelMetadata("a", "7", &meta).code(), StatusCode::kNotFound);
  Status not_loaded = server_->ModelMetadata("b", "", &meta);
  EXPECT_EQ(not_loaded.code(), StatusCode::kNotFound);
  EXPECT_NE(not_loaded.message().find("is in the repository but not loaded"), std::string::npos)
      << not_loaded.message();

  inference::ModelConfigResponse config;
  ASSERT_TRUE(server_->ModelConfig("a", "", &config).ok());
  EXPECT_EQ(config.config().max_batch_size(), 8);

  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(server_->ModelStatistics("", "", &stats).ok());
  EXPECT_EQ(stats.model_stats_size(), 1);  // every ready model: a

  inference::RepositoryIndexResponse all, ready;
  server_->RepositoryIndex(false, &all);
  server_->RepositoryIndex(true, &ready);
  EXPECT_EQ(all.models_size(), 2);
  ASSERT_EQ(ready.models_size(), 1);
  EXPECT_EQ(ready.models(0).name(), "a");
  EXPECT_EQ(ready.models(0).state(), "READY");

  EXPECT_TRUE(server_->Live());
  EXPECT_TRUE(server_->Ready());
  EXPECT_EQ(server_->Drain(Clock::now() + 5s), 0u);  // nothing was running
  EXPECT_FALSE(server_->Ready());
  EXPECT_TRUE(server_->Live());
  inference::ModelInferResponse out;
  Status refused = Infer(Wire("a", 1, 2), &out);
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);  // new requests are refused
  EXPECT_NE(refused.message().find("shutting down"), std::string::npos) << refused.message();
}

// Every thread a server has, at once: clients inferring on two models, one
// model reloaded and the other unloaded and loaded again on the repository
// thread, and readers of statistics, metadata, the index and readiness. No
// request to the reloaded model fails, and each answer is its fake's. Its
// interleavings are what ThreadSanitizer checks (make test-tsan).
TEST_F(InferenceServerTest, ConcurrentInferenceReloadsAndReadersAgree) {
  WriteArchive("a.mpk", TestManifest("a", 1));
  WriteArchive("b.mpk", TestManifest("b", 1));
  Start(true, {"a", "b"});
  std::atomic<bool> stop{false};
  std::atomic<int> a_answers{0}, b_answers{0};
  std::vector<std::thread> threads;
  for (int c = 0; c < 4; ++c) {
    threads.emplace_back([&, c] {
      const std::string model = c % 2 == 0 ? "a" : "b";
      while (!stop) {
        inference::ModelInferResponse out;
        Status s = Infer(Wire(model, 1, 2), &out);
        if (model == "a") {
          ASSERT_TRUE(s.ok()) << "a reload failed a request: " << s.ToString();
        } else if (!s.ok()) {  // b is away between its unload and its load
          ASSERT_TRUE(s.code() == StatusCode::kNotFound || s.code() == StatusCode::kUnavailable)
              << s.ToString();
          continue;
        }
        float values[2];
        ASSERT_EQ(out.raw_output_contents(0).size(), sizeof(values));
        memcpy(values, out.raw_output_contents(0).data(), sizeof(values));
        EXPECT_EQ(values[0], 10);  // version 1 multiplies by 10
        EXPECT_EQ(values[1], 20);
        ++(model == "a" ? a_answers : b_answers);
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop) {
      inference::ModelStatisticsResponse stats;
      EXPECT_TRUE(server_->ModelStatistics("", "", &stats).ok());
      inference::ModelMetadataResponse meta;
      (void)server_->ModelMetadata("a", "", &meta);  // NOT_FOUND for an instant in a reload
      inference::RepositoryIndexResponse index;
      server_->RepositoryIndex(false, &index);
      EXPECT_EQ(index.models_size(), 2);
      EXPECT_TRUE(server_->Ready());
    }
  });
  for (int round = 0; round < 6; ++round) {
    Completion reload;
    server_->LoadModel("a", {}, reload.Callback());
    EXPECT_TRUE(reload.Wait().first.ok());
    Completion unload;
    server_->UnloadModel("b", unload.Callback());
    EXPECT_TRUE(unload.Wait().first.ok());
    Completion load;
    server_->LoadModel("b", {}, load.Callback());
    EXPECT_TRUE(load.Wait().first.ok());
  }
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_GT(a_answers.load(), 0);
  EXPECT_GT(b_answers.load(), 0);
  EXPECT_EQ(server_->Drain(Clock::now() + 5s), 0u);
}

}  // namespace
}  // namespace manypy
