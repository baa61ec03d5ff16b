// The Dispatcher's running batch (continuous batching of a streaming model)
// with a fake model: requests join at the next step up to the model's size,
// leave when they finish, fail alone, are cancelled or pass their deadline,
// each stream's responses in order; statistics and the streams gauge.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "server/inference/dispatcher.h"
#include "tests/test_util/fake_batched_streams.h"

namespace manypy {
namespace {

using namespace std::chrono_literals;
using testing::FakeBatchedStreams;

// What one stream received, and how it ended.
struct StreamRecord {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<float> responses;
  bool ended = false;
  Status status;
  std::atomic<bool> leave{false};  // the client left

  bool WaitEnded(std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return ended; });
  }
  bool WaitResponses(size_t n, std::chrono::milliseconds timeout = 20s) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return responses.size() >= n || ended; }) &&
           responses.size() >= n;
  }
  // Each response i carries i: none lost, none reordered.
  bool InOrder() {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < responses.size(); ++i) {
      if (responses[i] != static_cast<float>(i)) return false;
    }
    return true;
  }
};

RequestPtr StreamRequest(const std::shared_ptr<StreamRecord>& record, int64_t count,
                         int64_t fail_at = -1) {
  auto r = std::make_unique<InferenceRequest>();
  r->inputs.emplace_back(at::tensor({count, fail_at}));
  r->times.received = r->times.prepared = Clock::now();
  r->cancelled = [record] { return record->leave.load(); };
  r->stream = [record](std::vector<Value>& outputs, std::chrono::microseconds) {
    if (record->leave) return Cancelled("the client left");
    std::lock_guard<std::mutex> lock(record->mu);
    record->responses.push_back(outputs[0].to_tensor()[0].item<float>());
    record->cv.notify_all();
    return Status::Ok();
  };
  r->reply = [record](const Status& s) {
    std::lock_guard<std::mutex> lock(record->mu);
    record->status = s;
    record->ended = true;
    record->cv.notify_all();
  };
  return r;
}

std::shared_ptr<DispatchedModel> BatchedModel(std::shared_ptr<Executable> exe, size_t instances = 1,
                                              std::chrono::microseconds limit = 60s) {
  Manifest m;
  m.name = "fake";
  m.streaming = true;
  m.inputs = {{"IN", "INT64", {2}}};
  m.outputs = {{"OUT", "FP32", {1}}};
  return std::make_shared<DispatchedModel>(m, ModelLimits{instances, limit, {}},
                                           std::make_unique<FifoScheduler>("fake", 1000), std::move(exe));
}

std::vector<std::shared_ptr<StreamRecord>> Records(size_t n) {
  std::vector<std::shared_ptr<StreamRecord>> out;
  for (size_t i = 0; i < n; ++i) out.push_back(std::make_shared<StreamRecord>());
  return out;
}

TEST(DispatcherBatchTest, ARequestJoinsTheRunningBatchAtTheNextStepAndEachStreamStaysInOrder) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 2ms);
  Dispatcher d({1});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 60)), nullptr);
  ASSERT_TRUE(records[0]->WaitResponses(5));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 10)), nullptr);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 20)), nullptr);
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  // The two joined while the first ran: it was not over when they finished.
  EXPECT_EQ(records[0]->responses.size(), 60u);
  EXPECT_EQ(records[1]->responses.size(), 10u);
  EXPECT_EQ(records[2]->responses.size(), 20u);
  for (auto& r : records) {
    EXPECT_TRUE(r->status.ok()) << r->status.ToString();
    EXPECT_TRUE(r->InOrder());
  }
  std::vector<size_t> sizes = fake->step_sizes();
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 3u);  // one step advanced all three
  // A step per response of the longest: the joiners rode along from the
  // step after they came (no step of their own).
  EXPECT_EQ(sizes.size(), 60u);
  EXPECT_EQ(model->stats().execution_count.load(), sizes.size());  // a step is an execution
  EXPECT_EQ(model->stats().success_count.load(), 3u);
  EXPECT_EQ(fake->live_states(), 0u);  // every state dropped as its request left
}

TEST(DispatcherBatchTest, AStepAdvancesAtMostTheModelsSizeAndTheRestJoinAsOthersLeave) {
  auto fake = std::make_shared<FakeBatchedStreams>(4, 1ms);
  Dispatcher d({2});
  auto model = BatchedModel(fake);  // one instance: one running batch
  d.Add(model);
  auto records = Records(10);
  for (size_t i = 0; i < records.size(); ++i) {
    ASSERT_EQ(d.Submit(model, StreamRequest(records[i], 5 + static_cast<int64_t>(i))), nullptr);
  }
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_TRUE(records[i]->status.ok()) << records[i]->status.ToString();
    EXPECT_EQ(records[i]->responses.size(), 5 + i);
    EXPECT_TRUE(records[i]->InOrder());
  }
  std::vector<size_t> sizes = fake->step_sizes();
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 4u);
  EXPECT_EQ(model->stats().success_count.load(), 10u);
}

TEST(DispatcherBatchTest, AStepFailingOneNamedStateFailsThatRequestAloneAndTheOthersGoOn) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 1ms);
  Dispatcher d({1});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 20)), nullptr);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 20, /*fail_at=*/4)), nullptr);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 20)), nullptr);
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  EXPECT_EQ(records[1]->status.code(), StatusCode::kInternal);
  EXPECT_NE(records[1]->status.message().find("ValueError"), std::string::npos);
  EXPECT_EQ(records[1]->responses.size(), 4u);  // the responses before the failure stand
  for (size_t i : {0u, 2u}) {
    EXPECT_TRUE(records[i]->status.ok()) << records[i]->status.ToString();
    EXPECT_EQ(records[i]->responses.size(), 20u);
    EXPECT_TRUE(records[i]->InOrder());
  }
  EXPECT_EQ(model->stats().success_count.load(), 2u);
  EXPECT_EQ(model->stats().fail_count.load(), 1u);
}

TEST(DispatcherBatchTest, AStepThatCannotSayWhoseStateFailedFailsEachOfItsRequestsAndTheNextBatchServes) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 1ms);
  Dispatcher d({1});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 20)), nullptr);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 20, /*fail_at=*/-2)), nullptr);
  for (size_t i : {0u, 1u}) {
    ASSERT_TRUE(records[i]->WaitEnded());
    EXPECT_EQ(records[i]->status.code(), StatusCode::kInternal);
    EXPECT_NE(records[i]->status.message().find("the step failed"), std::string::npos);
  }
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 5)), nullptr);
  ASSERT_TRUE(records[2]->WaitEnded());
  EXPECT_TRUE(records[2]->status.ok()) << records[2]->status.ToString();
  EXPECT_EQ(fake->live_states(), 0u);
}

TEST(DispatcherBatchTest, ACancelledOrExpiredRequestLeavesAtTheStepBoundaryWithoutStoppingTheOthers) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 2ms);
  Dispatcher d({1});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 100)), nullptr);
  RequestPtr short_deadline = StreamRequest(records[1], 1000);
  short_deadline->client_deadline = Clock::now() + 50ms;
  ASSERT_EQ(d.Submit(model, std::move(short_deadline)), nullptr);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 1000)), nullptr);
  ASSERT_TRUE(records[2]->WaitResponses(3));
  records[2]->leave = true;
  ASSERT_TRUE(records[2]->WaitEnded());
  EXPECT_EQ(records[2]->status.code(), StatusCode::kCancelled);
  ASSERT_TRUE(records[1]->WaitEnded());
  EXPECT_EQ(records[1]->status.code(), StatusCode::kDeadlineExceeded) << records[1]->status.ToString();
  ASSERT_TRUE(records[0]->WaitEnded());
  EXPECT_TRUE(records[0]->status.ok()) << records[0]->status.ToString();
  EXPECT_EQ(records[0]->responses.size(), 100u);
  EXPECT_TRUE(records[0]->InOrder());
  EXPECT_EQ(model->stats().success_count.load(), 1u);
  EXPECT_EQ(model->stats().fail_count.load(), 1u);    // the deadline
  EXPECT_EQ(model->stats().cancel_count.load(), 1u);  // the client that left
  EXPECT_EQ(fake->live_states(), 0u);
}

TEST(DispatcherBatchTest, TheStreamsGaugeCountsTheRunningBatchsRequests) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 2ms);
  Dispatcher d({1});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  for (auto& r : records) ASSERT_EQ(d.Submit(model, StreamRequest(r, 200)), nullptr);
  for (auto& r : records) ASSERT_TRUE(r->WaitResponses(2));
  std::vector<Dispatcher::ModelLoad> loads = d.Loads();
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(loads[0].streams, 3u);
  EXPECT_EQ(loads[0].running, 1u);  // one execution: the running batch
  for (auto& r : records) r->leave = true;
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  EXPECT_TRUE(d.Drain(Clock::now() + 5s));
  EXPECT_EQ(d.Loads()[0].streams, 0u);
}

}  // namespace
}  // namespace manypy
