// BatchedStreamingTest: continuous batching against the real manypy-server
// over gRPC streaming, with batched_counter (tests/server/models/
// streaming_models.py: start/step, up to 4 requests a step): requests join
// mid-stream up to the model's size, each stream's responses in order; an
// exception naming one state fails that request alone; one naming none fails
// the step's requests; a cancelled stream and one past its deadline leave
// while the others go on; the requests are counted once each, and /metrics
// shows the running streams and the batch size of each step.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using Stream = grpc::ClientReaderWriter<ModelInferRequest, inference::ModelStreamInferResponse>;

void AddInt(ModelInferRequest* r, const std::string& name, int64_t value) {
  auto* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype("INT64");
  in->add_shape(1);
  r->add_raw_input_contents(Raw(std::vector<int64_t>{value}));
}

ModelInferRequest Counter(const std::string& id, int64_t count, int64_t step_ms, int64_t fail_at = -1) {
  ModelInferRequest r;
  r.set_model_name("batched_counter");
  r.set_id(id);
  AddInt(&r, "COUNT", count);
  AddInt(&r, "FAIL_AT", fail_at);
  AddInt(&r, "STEP_MS", step_ms);
  (*r.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  return r;
}

bool Final(const inference::ModelStreamInferResponse& r) {
  auto it = r.infer_response().parameters().find("triton_final_response");
  return it != r.infer_response().parameters().end() && it->second.bool_param();
}

int64_t Output(const inference::ModelStreamInferResponse& r, int index) {
  return FromRaw<int64_t>(r.infer_response().raw_output_contents(index)).at(0);
}

// What one request of a stream received: its INDEX and BATCH values, its error.
struct Received {
  std::vector<int64_t> index, batch;
  std::string error;
  bool ended = false;
};

// Reads `s` until each of `ids` has ended (its final response or its error).
std::map<std::string, Received> ReadAll(Stream& s, size_t ids) {
  std::map<std::string, Received> got;
  size_t ended = 0;
  inference::ModelStreamInferResponse r;
  while (ended < ids && s.Read(&r)) {
    Received& x = got[r.infer_response().id()];
    if (!r.error_message().empty()) {
      x.error = r.error_message();
    } else if (!Final(r)) {
      x.index.push_back(Output(r, 0));
      x.batch.push_back(Output(r, 1));
      continue;
    }
    x.ended = true;
    ++ended;
  }
  return got;
}

bool InOrder(const std::vector<int64_t>& index) {
  for (size_t i = 0; i < index.size(); ++i) {
    if (index[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

class BatchedStreamingTest : public ServerTest {
 protected:
  void Start() {
    StartServer({std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/streaming",
                 "--interpreters=1"});
  }
  std::unique_ptr<Stream> Open(grpc::ClientContext* ctx) { return stub_->ModelStreamInfer(ctx); }
  uint64_t WaitForCount(uint64_t want, uint64_t (*count)(const inference::ModelStatistics&)) {
    uint64_t n = 0;
    for (auto until = Clock::now() + 5s; Clock::now() < until && n < want; std::this_thread::sleep_for(10ms)) {
      n = count(Statistics("batched_counter"));
    }
    return n;
  }
};

TEST_F(BatchedStreamingTest, RequestsJoinMidStreamUpToTheModelsSizeAndEachStreamStaysInOrder) {
  Start();
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(Counter("first", 40, 10)));
  inference::ModelStreamInferResponse r;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Read(&r));  // it runs alone now
  EXPECT_EQ(Output(r, 1), 1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(s->Write(Counter("late" + std::to_string(i), 10, 10)));
  std::map<std::string, Received> got = ReadAll(*s, 6);
  got["first"].index.insert(got["first"].index.begin(), {0, 1, 2});
  got["first"].batch.insert(got["first"].batch.begin(), {1, 1, 1});
  ASSERT_EQ(got.size(), 6u);
  int64_t largest = 0;
  for (auto& [id, x] : got) {
    EXPECT_TRUE(x.error.empty()) << id << ": " << x.error;
    EXPECT_EQ(x.index.size(), id == "first" ? 40u : 10u) << id;
    EXPECT_TRUE(InOrder(x.index)) << id;
    for (int64_t b : x.batch) largest = std::max(largest, b);
  }
  EXPECT_EQ(largest, 4);  // the late ones joined the first's batch, never past its size
  // The first ran alone, then with the others: it did not wait for them.
  EXPECT_GT(*std::max_element(got["first"].batch.begin(), got["first"].batch.end()), 1);
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  EXPECT_EQ(WaitForCount(6, [](const inference::ModelStatistics& m) {
              return static_cast<uint64_t>(m.inference_stats().success().count());
            }),
            6u);
}

TEST_F(BatchedStreamingTest, AStepExceptionNamingOneStateFailsThatRequestAloneAndTheOthersGoOn) {
  Start();
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(Counter("good", 20, 5)));
  ASSERT_TRUE(s->Write(Counter("bad", 20, 5, /*fail_at=*/5)));
  ASSERT_TRUE(s->Write(Counter("also_good", 20, 5)));
  std::map<std::string, Received> got = ReadAll(*s, 3);
  EXPECT_NE(got["bad"].error.find("StepFailed"), std::string::npos) << got["bad"].error;
  EXPECT_EQ(got["bad"].index.size(), 5u);  // the responses before it stand
  for (const char* id : {"good", "also_good"}) {
    EXPECT_TRUE(got[id].error.empty()) << id << ": " << got[id].error;
    EXPECT_EQ(got[id].index.size(), 20u) << id;
    EXPECT_TRUE(InOrder(got[id].index)) << id;
  }
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
}

TEST_F(BatchedStreamingTest, AStepExceptionNamingNoStateFailsEachRequestOfTheStepAndTheModelServesOn) {
  Start();
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(Counter("a", 20, 20)));
  ASSERT_TRUE(s->Write(Counter("b", 20, 20, /*fail_at=*/-2)));
  std::map<std::string, Received> got = ReadAll(*s, 2);
  for (const char* id : {"a", "b"}) {
    EXPECT_NE(got[id].error.find("RuntimeError"), std::string::npos) << id << ": " << got[id].error;
  }
  ASSERT_TRUE(s->Write(Counter("after", 3, 0)));
  got = ReadAll(*s, 1);
  EXPECT_TRUE(got["after"].error.empty()) << got["after"].error;
  EXPECT_EQ(got["after"].index, (std::vector<int64_t>{0, 1, 2}));
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
}

TEST_F(BatchedStreamingTest, ACancelledStreamAndOnePastItsDeadlineLeaveWhileTheOthersGoOn) {
  Start();
  grpc::ClientContext leaving_ctx;
  auto leaving = Open(&leaving_ctx);
  ASSERT_TRUE(leaving->Write(Counter("leaves", 100000, 5)));
  grpc::ClientContext timed_ctx;
  timed_ctx.set_deadline(std::chrono::system_clock::now() + 300ms);
  auto timed = Open(&timed_ctx);
  ASSERT_TRUE(timed->Write(Counter("timed", 100000, 5)));
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(Counter("stays", 150, 5)));
  inference::ModelStreamInferResponse r;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(leaving->Read(&r));
  leaving_ctx.TryCancel();
  leaving->Finish();
  while (timed->Read(&r)) {
  }
  EXPECT_EQ(timed->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  std::map<std::string, Received> got = ReadAll(*s, 1);
  EXPECT_TRUE(got["stays"].error.empty()) << got["stays"].error;
  EXPECT_EQ(got["stays"].index.size(), 150u);
  EXPECT_TRUE(InOrder(got["stays"].index));
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  // Each counted once: the one that stayed a success; the two that left as
  // cancelled or past their deadline (whichever the server saw first).
  inference::ModelStatistics stats;
  for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(10ms)) {
    stats = Statistics("batched_counter");
    if (stats.inference_stats().cancel().count() + stats.inference_stats().fail().count() >= 2) break;
  }
  EXPECT_EQ(stats.inference_stats().success().count(), 1u);
  EXPECT_EQ(stats.inference_stats().cancel().count() + stats.inference_stats().fail().count(), 2u);
}

// The value of the sample `series` (name and labels) in `metrics`; -1 if absent.
double Sample(const std::string& metrics, const std::string& series) {
  size_t at = metrics.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + series.size() + 2));
}

TEST_F(BatchedStreamingTest, MetricsShowTheRunningStreamsAndTheBatchSizeOfEachStep) {
  Start();
  const std::string labels = R"({model="batched_counter",version="1"})";
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Write(Counter("s" + std::to_string(i), 150, 5)));
  inference::ModelStreamInferResponse r;
  std::map<std::string, size_t> early;  // responses read before the scrape, by request
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(s->Read(&r));
    early[r.infer_response().id()]++;
  }
  double streams = -1;
  for (auto until = Clock::now() + 5s; Clock::now() < until && streams != 3; std::this_thread::sleep_for(10ms)) {
    testing::HttpConnection metrics(server_.metrics_port());
    streams = Sample(metrics.Send("GET", "/metrics").body, "manypy_active_streams" + labels);
  }
  EXPECT_EQ(streams, 3);
  std::map<std::string, Received> got = ReadAll(*s, 3);
  for (auto& [id, x] : got) EXPECT_EQ(early[id] + x.index.size(), 150u) << id;
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  // Each step is one execution whose rows are the streams it advanced: the
  // histogram's count is the steps, its sum the responses computed.
  inference::ModelStatistics stats = Statistics("batched_counter");
  testing::HttpConnection metrics(server_.metrics_port());
  std::string text = metrics.Send("GET", "/metrics").body;
  EXPECT_EQ(Sample(text, "manypy_batch_size_count" + labels),
            static_cast<double>(stats.execution_count()));
  EXPECT_EQ(Sample(text, "manypy_batch_size_sum" + labels), static_cast<double>(stats.inference_count()));
  EXPECT_EQ(stats.inference_count(), 450u);  // 3 x 150 responses
  EXPECT_LT(stats.execution_count(), 450u);  // in fewer steps: they were batched
  EXPECT_EQ(Sample(text, "manypy_active_streams" + labels), 0);
}

}  // namespace
}  // namespace manypy
