// The Dispatcher with fake models (no Python, no sockets): batches form and
// split back per request, instance limits, fairness, deadlines while queued,
// execution limits, retirement and shutdown, slots held for model loads.
#include "server/inference/dispatcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "server/inference/batching_scheduler.h"
#include "tests/test_util/fake_executable.h"
#include "tests/test_util/request_builder.h"

namespace manypy {
namespace {

using namespace std::chrono_literals;
using testing::Answers;
using testing::FakeExecutable;
using testing::MakeRequest;

Manifest FakeManifest(const std::string& name, int64_t max_batch = 16) {
  Manifest m;
  m.name = name;
  m.max_batch_size = max_batch;
  m.inputs = {{"IN", "FP32", {2}}};
  m.outputs = {{"OUT", "FP32", {2}}};
  return m;
}

std::shared_ptr<DispatchedModel> MakeQueue(const std::string& name, std::shared_ptr<Executable> exe,
                                      size_t instances, bool batching,
                                      std::chrono::microseconds limit = 60s,
                                      size_t max_queue = 1000, int64_t delay_us = 0) {
  Manifest m = FakeManifest(name);
  std::unique_ptr<Scheduler> s;
  if (batching) {
    BatchingSpec spec;
    spec.dynamic = true;
    spec.max_queue_delay_microseconds = delay_us;
    s = std::make_unique<BatchingScheduler>(name, max_queue, m.max_batch_size, spec);
  } else {
    s = std::make_unique<FifoScheduler>(name, max_queue);
  }
  return std::make_shared<DispatchedModel>(m, ModelLimits{instances, limit, {}}, std::move(s),
                                          std::move(exe));
}

void Submit(Dispatcher& d, const std::shared_ptr<DispatchedModel>& q, RequestPtr r) {
  EXPECT_EQ(d.Submit(q, std::move(r)), nullptr) << "handed back: the model had left";
}

TEST(DispatcherTest, BatchesFormAndEachRequestGetsItsOwnRows) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 20ms);
  Dispatcher d({2});
  auto q = MakeQueue("m", fake, 2, /*batching=*/true);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  const int n = 64;
  for (int i = 0; i < n; ++i) Submit(d, q, MakeRequest(answers, static_cast<float>(i), 1 + i % 2));
  ASSERT_TRUE(answers->Wait(n));
  std::map<float, int> seen;
  for (const auto& a : answers->Get()) {
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    const at::Tensor& out = a.outputs[0].to_tensor();
    float v = out[0][0].item<float>() / 2;
    EXPECT_TRUE(at::equal(out, at::full(out.sizes(), v * 2)));  // only its own rows
    EXPECT_EQ(out.size(0), 1 + static_cast<int>(v) % 2);
    seen[v]++;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_LT(q->stats().execution_count.load(), static_cast<uint64_t>(n) / 2);  // batches formed
  EXPECT_EQ(q->stats().inference_count.load(), 96u);  // 32 x 1 + 32 x 2 rows
  EXPECT_EQ(q->stats().success_count.load(), static_cast<uint64_t>(n));
}

TEST(DispatcherTest, WithoutBatchingEveryRequestIsOneExecution) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 1ms);
  Dispatcher d({2});
  auto q = MakeQueue("m", fake, 2, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  for (int i = 0; i < 20; ++i) Submit(d, q, MakeRequest(answers, 1));
  ASSERT_TRUE(answers->Wait(20));
  EXPECT_EQ(q->stats().execution_count.load(), 20u);
}

TEST(DispatcherTest, InstanceCountBoundsConcurrentCallsOfAModel) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 10ms);
  Dispatcher d({3});
  auto q = MakeQueue("m", fake, 1, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  for (int i = 0; i < 12; ++i) Submit(d, q, MakeRequest(answers, 1));
  ASSERT_TRUE(answers->Wait(12));
  EXPECT_EQ(fake->max_running_.load(), 1);
}

TEST(DispatcherTest, AllSlotsServeAModelWithoutALimit) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 30ms);
  Dispatcher d({3});
  auto q = MakeQueue("m", fake, 3, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  for (int i = 0; i < 9; ++i) Submit(d, q, MakeRequest(answers, 1));
  ASSERT_TRUE(answers->Wait(9));
  EXPECT_EQ(fake->max_running_.load(), 3);
}

TEST(DispatcherTest, AColdModelIsServedWhileAHotOneHasABacklog) {
  auto hot = std::make_shared<FakeExecutable>(2.0, 5ms);
  auto cold = std::make_shared<FakeExecutable>(3.0, 0us);
  Dispatcher d({1});
  auto hq = MakeQueue("hot", hot, 1, false);
  auto cq = MakeQueue("cold", cold, 1, false);
  d.Add(hq);
  d.Add(cq);
  auto hot_answers = std::make_shared<Answers>();
  auto cold_answers = std::make_shared<Answers>();
  for (int i = 0; i < 200; ++i) Submit(d, hq, MakeRequest(hot_answers, 1));
  Submit(d, cq, MakeRequest(cold_answers, 1));
  ASSERT_TRUE(cold_answers->Wait(1));
  // Turns alternate: the cold request ran after at most a couple of hot ones.
  EXPECT_LT(hq->stats().execution_count.load(), 10u);
  ASSERT_TRUE(hot_answers->Wait(200));
}

TEST(DispatcherTest, AHeldSlotStartsNothingWhileTheOthersServeOnAndServesAgainAfter) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 2ms);
  Dispatcher d({2});
  auto q = MakeQueue("m", fake, 2, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  bool all_answered_while_held = false;
  d.RunOnSlot(0, [&] {
    for (int i = 0; i < 20; ++i) Submit(d, q, MakeRequest(answers, 1));
    all_answered_while_held = answers->Wait(20);
  });
  ASSERT_TRUE(all_answered_while_held) << "slot 1 did not serve while slot 0 was held";
  {
    std::lock_guard<std::mutex> lock(fake->mu_);
    for (size_t slot : fake->slots_) EXPECT_EQ(slot, 1u) << "a call ran on the held slot";
  }
  // Given back, slot 0 serves again: two calls at once need both slots.
  auto slow = std::make_shared<FakeExecutable>(2.0, 100ms);
  auto sq = MakeQueue("slow", slow, 2, false);
  d.Add(sq);
  auto more = std::make_shared<Answers>();
  for (int i = 0; i < 4; ++i) Submit(d, sq, MakeRequest(more, 1));
  ASSERT_TRUE(more->Wait(4));
  std::lock_guard<std::mutex> lock(slow->mu_);
  EXPECT_GT(std::count(slow->slots_.begin(), slow->slots_.end(), 0u), 0);
}

TEST(DispatcherTest, HoldingASlotWaitsForItsCallAndQueuedRequestsRunWhenGivenBack) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1});
  auto q = MakeQueue("m", fake, 1, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  Submit(d, q, MakeRequest(answers, FakeExecutable::hang_value));
  while (fake->running_ == 0) std::this_thread::sleep_for(1ms);
  std::atomic<bool> held{false};
  std::thread holder([&] {
    d.RunOnSlot(0, [&] {
      held = true;
      EXPECT_EQ(fake->running_.load(), 0) << "held while a call still ran there";
      Submit(d, q, MakeRequest(answers, 3));
      std::this_thread::sleep_for(50ms);
      EXPECT_EQ(answers->Get().size(), 1u) << "a call started on the held slot";
    });
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(held) << "the slot was held while its call ran";
  fake->release_ = true;  // the running call ends; the holder goes next
  holder.join();
  EXPECT_TRUE(held);
  ASSERT_TRUE(answers->Wait(2));
  EXPECT_TRUE(answers->Get()[1].status.ok()) << answers->Get()[1].status.ToString();
  EXPECT_EQ(fake->calls_.load(), 2);
}

TEST(DispatcherTest, FullQueueIsRefusedAtOnce) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  fake->release_ = false;
  Dispatcher d({1});
  auto q = MakeQueue("busy", fake, 1, false, 60s, /*max_queue=*/3);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  Submit(d, q, MakeRequest(answers, FakeExecutable::hang_value));  // occupies the slot
  while (fake->running_ == 0) std::this_thread::sleep_for(1ms);
  for (int i = 0; i < 4; ++i) Submit(d, q, MakeRequest(answers, 1));
  ASSERT_TRUE(answers->Wait(1));
  auto refused = answers->Get()[0];
  EXPECT_EQ(refused.status.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status.message().find("busy"), std::string::npos);
  fake->release_ = true;
  ASSERT_TRUE(answers->Wait(5));
}

TEST(DispatcherTest, DeadlinePassedWhileQueuedIsAnsweredAndNeverRun) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1});
  auto q = MakeQueue("m", fake, 1, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  Submit(d, q, MakeRequest(answers, FakeExecutable::hang_value));
  while (fake->running_ == 0) std::this_thread::sleep_for(1ms);
  RequestPtr r = MakeRequest(answers, 5);
  r->deadline = Clock::now() + 100ms;
  Clock::time_point submitted = Clock::now();
  Submit(d, q, std::move(r));
  ASSERT_TRUE(answers->Wait(1));  // while the slot is still busy
  auto a = answers->Get()[0];
  EXPECT_EQ(a.status.code(), StatusCode::kDeadlineExceeded) << a.status.ToString();
  EXPECT_LT(Clock::now() - submitted, 1s);
  fake->release_ = true;
  ASSERT_TRUE(answers->Wait(2));
  EXPECT_EQ(fake->calls_.load(), 1);  // the expired request never ran
}

TEST(DispatcherTest, CallPastItsLimitIsInterruptedAndTheSlotServesAgain) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1});
  auto q = MakeQueue("stuck", fake, 1, false, /*limit=*/200ms);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  Submit(d, q, MakeRequest(answers, FakeExecutable::hang_value));
  Submit(d, q, MakeRequest(answers, 4));
  ASSERT_TRUE(answers->Wait(2));
  auto got = answers->Get();
  EXPECT_EQ(got[0].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(got[0].status.message().find("execution limit of 0.2 s"), std::string::npos)
      << got[0].status.message();
  ASSERT_TRUE(got[1].status.ok());
  EXPECT_EQ(got[1].outputs[0].to_tensor()[0][0].item<float>(), 8);
}

TEST(DispatcherTest, CallPastItsClientsDeadlineIsInterruptedAndAnsweredDeadlineExceeded) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1});
  auto q = MakeQueue("slow", fake, 1, false, /*limit=*/0ms);  // no execution limit
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  RequestPtr r = MakeRequest(answers, FakeExecutable::hang_value);
  r->client_deadline = Clock::now() + 200ms;
  Clock::time_point start = Clock::now();
  Submit(d, q, std::move(r));
  Submit(d, q, MakeRequest(answers, 4));
  ASSERT_TRUE(answers->Wait(2, 5s));
  EXPECT_LT(Clock::now() - start, 2s);
  auto got = answers->Get();
  EXPECT_EQ(got[0].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(got[0].status.message().find("passed while it ran"), std::string::npos)
      << got[0].status.message();
  ASSERT_TRUE(got[1].status.ok());  // the slot serves the next one
  EXPECT_EQ(q->stats().fail_count.load(), 1u);
}

TEST(DispatcherTest, CallWhoseClientLeftIsInterruptedAndCountedAsCancelled) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1});
  auto q = MakeQueue("slow", fake, 1, false, /*limit=*/0ms);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  auto left = std::make_shared<std::atomic<bool>>(false);
  RequestPtr r = MakeRequest(answers, FakeExecutable::hang_value);
  r->cancelled = [left] { return left->load(); };
  Submit(d, q, std::move(r));
  std::this_thread::sleep_for(150ms);
  *left = true;
  ASSERT_TRUE(answers->Wait(1, 5s));
  EXPECT_EQ(answers->Get()[0].status.code(), StatusCode::kCancelled);
  EXPECT_EQ(q->stats().cancel_count.load(), 1u);
  EXPECT_EQ(q->stats().fail_count.load(), 0u);
  // A queued request whose client left is cancelled before it runs.
  RequestPtr queued = MakeRequest(answers, 1);
  queued->cancelled = [] { return true; };
  Submit(d, q, std::move(queued));
  ASSERT_TRUE(answers->Wait(2, 5s));
  EXPECT_EQ(answers->Get()[1].status.code(), StatusCode::kCancelled);
  EXPECT_EQ(q->stats().cancel_count.load(), 2u);
}

TEST(DispatcherTest, ModelsDefaultTimeoutLimitsTheQueueNotARunningCall) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 300ms);
  Dispatcher d({1});
  auto q = MakeQueue("slow", fake, 1, false, /*limit=*/0ms);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  RequestPtr r = MakeRequest(answers, 1);
  r->deadline = Clock::now() + 100ms;  // the default timeout: it starts in time, then runs 300 ms
  Submit(d, q, std::move(r));
  ASSERT_TRUE(answers->Wait(1, 5s));
  EXPECT_TRUE(answers->Get()[0].status.ok()) << answers->Get()[0].status.ToString();
}

TEST(DispatcherTest, CallThatIgnoresTheFirstInterruptIsInterruptedAgain) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1, std::chrono::milliseconds(100)});
  auto q = MakeQueue("stubborn", fake, 1, false, 100ms);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  fake->ignore_interrupts_ = true;
  Submit(d, q, MakeRequest(answers, FakeExecutable::hang_value));
  std::this_thread::sleep_for(350ms);
  fake->ignore_interrupts_ = false;  // the next interrupt lands
  ASSERT_TRUE(answers->Wait(1, 5s));
  EXPECT_EQ(answers->Get()[0].status.code(), StatusCode::kDeadlineExceeded);
}

TEST(DispatcherTest, CallThatCannotBeInterruptedIsAnsweredAsOverItsLimitWhenItEnds) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 400ms);  // as a TorchScript call
  fake->ignore_interrupts_ = true;
  Dispatcher d({1});
  auto q = MakeQueue("uninterruptible", fake, 1, false, /*limit=*/100ms);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  Clock::time_point submitted = Clock::now();
  Submit(d, q, MakeRequest(answers, 3));
  ASSERT_TRUE(answers->Wait(1, 5s));
  EXPECT_GE(Clock::now() - submitted, 400ms);  // it ran to its end
  auto got = answers->Get()[0];
  EXPECT_EQ(got.status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(got.status.message().find("cannot be interrupted"), std::string::npos)
      << got.status.message();
}

TEST(DispatcherTest, RetiredModelFinishesItsWorkThenLeavesAndHandsRequestsBack) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 20ms);
  Dispatcher d({1});
  auto q = MakeQueue("old", fake, 1, false);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  for (int i = 0; i < 3; ++i) Submit(d, q, MakeRequest(answers, 1));
  d.Retire(q);
  Submit(d, q, MakeRequest(answers, 1));  // a handle taken before the swap still works
  ASSERT_TRUE(answers->Wait(4));
  for (const auto& a : answers->Get()) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  for (int i = 0; i < 100 && !d.TEST_Drained(*q); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(d.TEST_Drained(*q));
  auto late = std::make_shared<Answers>();
  EXPECT_NE(d.Submit(q, MakeRequest(late, 1)), nullptr);  // handed back: look the model up again
  EXPECT_TRUE(late->Get().empty());
}

TEST(DispatcherTest, DrainWaitsForQueuedWorkAndAbandonAnswersStuckCalls) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 0us);
  Dispatcher d({1});
  auto q = MakeQueue("m", fake, 1, false, /*limit=*/0us);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  Submit(d, q, MakeRequest(answers, FakeExecutable::hang_value));
  Submit(d, q, MakeRequest(answers, 1));
  while (fake->running_ == 0) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(d.Drain(Clock::now() + 200ms));
  auto refused = std::make_shared<Answers>();
  Submit(d, q, MakeRequest(refused, 1));
  ASSERT_TRUE(refused->Wait(1));
  EXPECT_EQ(refused->Get()[0].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(d.Abandon(), 1u);
  ASSERT_TRUE(answers->Wait(2));
  for (const auto& a : answers->Get()) EXPECT_EQ(a.status.code(), StatusCode::kUnavailable);
  fake->release_ = true;  // the call returns later and is not answered twice
  while (fake->running_ > 0) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(answers->Get().size(), 2u);
}

TEST(DispatcherTest, OutputWithoutTheBatchRowsFailsEveryRequestOfTheBatch) {
  class Scalar final : public Executable {
   public:
    StatusOr<std::vector<Value>> Run(size_t, const std::vector<Value>&, InterruptHook*) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return std::vector<Value>{Value(at::ones({1}))};
    }
  };
  Dispatcher d({1});
  auto q = MakeQueue("scalar", std::make_shared<Scalar>(), 1, true, 60s, 100, 1000000);
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  for (int i = 0; i < 5; ++i) Submit(d, q, MakeRequest(answers, 1));
  ASSERT_TRUE(answers->Wait(5));
  int batched_failures = 0;
  for (const auto& a : answers->Get()) {
    if (!a.status.ok()) {
      ++batched_failures;
      EXPECT_NE(a.status.message().find("output 'OUT'"), std::string::npos) << a.status.message();
    }
  }
  EXPECT_GT(batched_failures, 0);
}

}  // namespace
}  // namespace manypy
