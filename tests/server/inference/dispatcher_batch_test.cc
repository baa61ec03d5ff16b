// The Dispatcher's running batch (continuous batching of a streaming model)
// with a fake model: requests join at the next step up to the model's size,
// leave when they finish, fail alone, are cancelled or pass their deadline,
// each stream's responses in order; statistics and the streams gauge; and
// prefill apart (a request prefilled on a free slot, adopted by the batch).
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
  size_t leave_after = 0;          // if > 0: the client leaves once it has this many

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
    if (record->leave_after > 0 && record->responses.size() >= record->leave_after) record->leave = true;
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

// Waits until a worker of `d` (2 slots) waits for work: a request submitted
// then is prefilled apart (a worker still starting is not free, and the
// batch would take the request at its next boundary).
bool WaitForAFreeSlot(const Dispatcher& d) {
  for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(1ms)) {
    if (d.TEST_SlotIdle(0) || d.TEST_SlotIdle(1)) return true;
  }
  return false;
}

// Prefill apart: a request that comes while the batch runs on one slot is
// prefilled on the other, its first response sent from there, and adopted
// by the batch at a step boundary; its stream goes on from the batch.
TEST(DispatcherBatchTest, ARequestIsPrefilledOnAFreeSlotAndTheRunningBatchAdoptsIt) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 2ms, 1ms);
  Dispatcher d({2});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(2);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 60)), nullptr);
  ASSERT_TRUE(records[0]->WaitResponses(3));
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 10)), nullptr);
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(records[i]->status.ok()) << records[i]->status.ToString();
    EXPECT_EQ(records[i]->responses.size(), i == 0 ? 60u : 10u);
    EXPECT_TRUE(records[i]->InOrder());
  }
  std::vector<size_t> prefills = fake->prefill_slots(), steps = fake->step_slots();
  ASSERT_EQ(prefills.size(), 1u);
  EXPECT_EQ(fake->adoptions(), 1u);
  // Every step ran on the batch's slot, the prefill on the other.
  EXPECT_EQ(std::count(steps.begin(), steps.end(), steps[0]), static_cast<long>(steps.size()));
  EXPECT_NE(prefills[0], steps[0]);
  std::vector<size_t> sizes = fake->step_sizes();
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 2u);
  // A step per response of the first; the second's first response was its
  // prefill, one execution more.
  EXPECT_EQ(sizes.size(), 60u);
  EXPECT_EQ(model->stats().execution_count.load(), sizes.size() + 1);
  EXPECT_EQ(model->stats().inference_count.load(), 70u);  // every response once
  EXPECT_EQ(model->stats().success_count.load(), 2u);
  EXPECT_EQ(fake->live_states(), 0u);
}

TEST(DispatcherBatchTest, WithNoFreeSlotARequestJoinsTheBatchAndIsPrefilledInItsStep) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 2ms, 1ms);
  Dispatcher d({1});  // the batch's slot is the only one
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(2);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 30)), nullptr);
  ASSERT_TRUE(records[0]->WaitResponses(3));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 10)), nullptr);
  for (auto& r : records) {
    ASSERT_TRUE(r->WaitEnded());
    EXPECT_TRUE(r->status.ok()) << r->status.ToString();
    EXPECT_TRUE(r->InOrder());
  }
  EXPECT_EQ(records[1]->responses.size(), 10u);
  EXPECT_TRUE(fake->prefill_slots().empty());
  EXPECT_EQ(fake->adoptions(), 0u);
}

TEST(DispatcherBatchTest, AFailedPrefillOrAdoptionFailsThatRequestAloneAndTheBatchGoesOn) {
  auto fake = std::make_shared<FakeBatchedStreams>(8, 2ms, 1ms);
  Dispatcher d({2});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 60)), nullptr);
  ASSERT_TRUE(records[0]->WaitResponses(3));
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 10, /*fail_at=*/-3)), nullptr);
  ASSERT_TRUE(records[1]->WaitEnded());
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 10, /*fail_at=*/-4)), nullptr);
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  EXPECT_EQ(records[1]->status.code(), StatusCode::kInternal);
  EXPECT_NE(records[1]->status.message().find("its prefill failed"), std::string::npos);
  EXPECT_TRUE(records[1]->responses.empty());
  EXPECT_EQ(records[2]->status.code(), StatusCode::kInternal);
  EXPECT_NE(records[2]->status.message().find("its adoption failed"), std::string::npos);
  EXPECT_EQ(records[2]->responses.size(), 1u);  // its prefill's response stands
  EXPECT_TRUE(records[0]->status.ok()) << records[0]->status.ToString();
  EXPECT_EQ(records[0]->responses.size(), 60u);
  EXPECT_TRUE(records[0]->InOrder());
  EXPECT_EQ(fake->prefill_slots().size(), 2u);
  EXPECT_EQ(model->stats().success_count.load(), 1u);
  EXPECT_EQ(model->stats().fail_count.load(), 2u);
  EXPECT_EQ(fake->live_states(), 0u);
}

TEST(DispatcherBatchTest, AClientThatLeavesBetweenItsPrefillAndItsAdoptionLeavesCleanly) {
  // Steps of 100 ms: the client leaves while the batch's step runs, after
  // its prefill handed it over and before the boundary that adopts it.
  auto fake = std::make_shared<FakeBatchedStreams>(8, 100ms, 1ms);
  Dispatcher d({2});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 8)), nullptr);
  ASSERT_TRUE(records[0]->WaitResponses(1));
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 100)), nullptr);
  ASSERT_TRUE(records[1]->WaitResponses(1));
  records[1]->leave = true;
  // And one whose client leaves as its first response arrives: it ends
  // where it was prefilled.
  records[2]->leave_after = 1;
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 100)), nullptr);
  for (auto& r : records) ASSERT_TRUE(r->WaitEnded());
  EXPECT_EQ(records[1]->status.code(), StatusCode::kCancelled) << records[1]->status.ToString();
  EXPECT_EQ(records[2]->status.code(), StatusCode::kCancelled) << records[2]->status.ToString();
  EXPECT_EQ(records[1]->responses.size(), 1u);
  EXPECT_EQ(records[2]->responses.size(), 1u);
  EXPECT_TRUE(records[0]->status.ok()) << records[0]->status.ToString();
  EXPECT_EQ(records[0]->responses.size(), 8u);
  EXPECT_EQ(fake->adoptions(), 0u);
  EXPECT_EQ(model->stats().cancel_count.load(), 2u);
  EXPECT_EQ(fake->live_states(), 0u);
  EXPECT_TRUE(d.Drain(Clock::now() + 5s));
}

TEST(DispatcherBatchTest, APrefillThatOutlivesTheBatchBecomesTheModelsBatch) {
  // The batch's one request ends while the other is being prefilled (50 ms):
  // no batch is left to adopt it, so its prefill's slot runs it on.
  auto fake = std::make_shared<FakeBatchedStreams>(8, 1ms, 50ms);
  Dispatcher d({2});
  auto model = BatchedModel(fake);
  d.Add(model);
  auto records = Records(3);
  ASSERT_EQ(d.Submit(model, StreamRequest(records[0], 5)), nullptr);
  ASSERT_TRUE(records[0]->WaitResponses(1));
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[1], 200)), nullptr);
  ASSERT_TRUE(records[0]->WaitEnded());
  ASSERT_TRUE(records[1]->WaitResponses(2));
  ASSERT_TRUE(WaitForAFreeSlot(d));
  ASSERT_EQ(d.Submit(model, StreamRequest(records[2], 5)), nullptr);
  for (auto& r : records) {
    ASSERT_TRUE(r->WaitEnded());
    EXPECT_TRUE(r->status.ok()) << r->status.ToString();
    EXPECT_TRUE(r->InOrder());
  }
  EXPECT_EQ(records[1]->responses.size(), 200u);
  EXPECT_EQ(records[2]->responses.size(), 5u);
  std::vector<size_t> prefills = fake->prefill_slots(), steps = fake->step_slots();
  ASSERT_FALSE(prefills.empty());
  EXPECT_EQ(steps.back(), prefills[0]);  // the second's slot stepped last
  EXPECT_EQ(fake->adoptions(), prefills.size());
  EXPECT_EQ(fake->live_states(), 0u);
  EXPECT_TRUE(d.Drain(Clock::now() + 5s));
  EXPECT_EQ(d.Loads()[0].running, 0u);
}

}  // namespace
}  // namespace manypy
