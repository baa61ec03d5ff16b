// FifoScheduler and BatchingScheduler on their own: queue bound, expiry, and
// when batches form. No threads, no Python.
#include "server/inference/scheduler.h"

#include <gtest/gtest.h>

#include "server/inference/batching_scheduler.h"
#include "tests/test_util/request_builder.h"

namespace manypy {
namespace {

using testing::Answers;
using testing::MakeRequest;

constexpr auto kNever = Clock::time_point::max();

TEST(FifoSchedulerTest, RunsOneRequestAtATimeInArrivalOrder) {
  auto answers = std::make_shared<Answers>();
  FifoScheduler fifo("m", 10);
  for (float v : {1.f, 2.f, 3.f}) {
    RequestPtr r = MakeRequest(answers, v);
    ASSERT_TRUE(fifo.Enqueue(&r).ok());
  }
  Clock::time_point wake = kNever;
  for (float v : {1.f, 2.f, 3.f}) {
    auto batch = fifo.Next(0, Clock::now(), false, &wake);
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch[0]->inputs[0].to_tensor()[0][0].item<float>(), v);
  }
  EXPECT_TRUE(fifo.Next(0, Clock::now(), true, &wake).empty());
}

TEST(FifoSchedulerTest, FullQueueRefusesNamingModelAndLimit) {
  auto answers = std::make_shared<Answers>();
  FifoScheduler fifo("resnet18", 2);
  for (int i = 0; i < 2; ++i) {
    RequestPtr r = MakeRequest(answers, 1);
    ASSERT_TRUE(fifo.Enqueue(&r).ok());
  }
  RequestPtr extra = MakeRequest(answers, 1);
  Status s = fifo.Enqueue(&extra);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("resnet18"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("max_queue_size 2"), std::string::npos) << s.message();
  EXPECT_NE(extra, nullptr);  // left to the caller to answer
  EXPECT_EQ(fifo.queued(), 2u);
}

TEST(FifoSchedulerTest, ExpireRemovesPastDeadlinesAndCancelledOnly) {
  auto answers = std::make_shared<Answers>();
  FifoScheduler fifo("m", 10);
  Clock::time_point now = Clock::now();
  RequestPtr late = MakeRequest(answers, 1);
  late->deadline = now - std::chrono::milliseconds(1);
  RequestPtr cancelled = MakeRequest(answers, 2);
  cancelled->cancelled = [] { return true; };
  RequestPtr fine = MakeRequest(answers, 3);
  fine->deadline = now + std::chrono::seconds(5);
  for (auto* r : {&late, &cancelled, &fine}) ASSERT_TRUE(fifo.Enqueue(r).ok());
  std::vector<RequestPtr> expired;
  Clock::time_point wake = kNever;
  fifo.Expire(now, &expired, &wake);
  EXPECT_EQ(expired.size(), 2u);
  EXPECT_EQ(fifo.queued(), 1u);
  EXPECT_EQ(wake, now + std::chrono::seconds(5));
}

BatchingSpec Spec(std::vector<int64_t> preferred, int64_t delay_us) {
  BatchingSpec s;
  s.dynamic = true;
  s.preferred_batch_sizes = std::move(preferred);
  s.max_queue_delay_microseconds = delay_us;
  return s;
}

TEST(BatchingSchedulerTest, JoinsUpToMaxBatchSizeInArrivalOrder) {
  auto answers = std::make_shared<Answers>();
  BatchingScheduler b("m", 100, 4, Spec({}, 1000000));
  for (int i = 0; i < 6; ++i) {
    RequestPtr r = MakeRequest(answers, static_cast<float>(i));
    ASSERT_TRUE(b.Enqueue(&r).ok());
  }
  Clock::time_point wake = kNever;
  auto batch = b.Next(0, Clock::now(), false, &wake);  // full: no waiting
  ASSERT_EQ(batch.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(batch[i]->inputs[0].to_tensor()[0][0].item<float>(), i);
  EXPECT_EQ(b.queued(), 2u);
}

TEST(BatchingSchedulerTest, WaitsForTheDelayUnlessTheModelIsIdle) {
  auto answers = std::make_shared<Answers>();
  BatchingScheduler b("m", 100, 8, Spec({}, 50000));
  RequestPtr r = MakeRequest(answers, 1);
  Clock::time_point now = r->times.prepared;
  ASSERT_TRUE(b.Enqueue(&r).ok());
  Clock::time_point wake = kNever;
  EXPECT_TRUE(b.Next(0, now, false, &wake).empty());
  EXPECT_EQ(wake, now + std::chrono::microseconds(50000));
  EXPECT_EQ(b.Next(0, now + std::chrono::microseconds(50000), false, &wake).size(), 1u);

  RequestPtr again = MakeRequest(answers, 2);
  ASSERT_TRUE(b.Enqueue(&again).ok());
  EXPECT_EQ(b.Next(0, Clock::now(), /*model_idle=*/true, &wake).size(), 1u);
}

TEST(BatchingSchedulerTest, PreferredSizeStartsABatchAtOnce) {
  auto answers = std::make_shared<Answers>();
  BatchingScheduler b("m", 100, 8, Spec({2, 4}, 1000000));
  for (int i = 0; i < 3; ++i) {
    RequestPtr r = MakeRequest(answers, static_cast<float>(i));
    ASSERT_TRUE(b.Enqueue(&r).ok());
  }
  Clock::time_point wake = kNever;
  // 3 queued: the largest preferred is 2.
  EXPECT_EQ(b.Next(0, Clock::now(), false, &wake).size(), 2u);
}

TEST(BatchingSchedulerTest, RaggedRequestsWaitForACompatibleBatch) {
  auto answers = std::make_shared<Answers>();
  BatchingScheduler b("m", 100, 8, Spec({}, 0));
  RequestPtr a1 = MakeRequest(answers, 1, 1, {2});
  RequestPtr c1 = MakeRequest(answers, 2, 1, {3});
  RequestPtr a2 = MakeRequest(answers, 3, 2, {2});
  for (auto* r : {&a1, &c1, &a2}) ASSERT_TRUE(b.Enqueue(r).ok());
  Clock::time_point wake = kNever;
  auto first = b.Next(0, Clock::now(), false, &wake);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0]->item_shapes[0], std::vector<int64_t>{2});
  EXPECT_EQ(first[1]->batch_rows, 2);
  auto second = b.Next(0, Clock::now(), false, &wake);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]->item_shapes[0], std::vector<int64_t>{3});
}

TEST(BatchingSchedulerTest, RowsOfMultiRowRequestsCountAgainstTheLimit) {
  auto answers = std::make_shared<Answers>();
  BatchingScheduler b("m", 100, 4, Spec({}, 1000000));
  RequestPtr three = MakeRequest(answers, 1, 3);
  RequestPtr two = MakeRequest(answers, 2, 2);
  for (auto* r : {&three, &two}) ASSERT_TRUE(b.Enqueue(r).ok());
  Clock::time_point wake = kNever;
  auto batch = b.Next(0, Clock::now(), false, &wake);  // 3 + 2 > 4: full at 3 rows
  ASSERT_EQ(batch.size(), 1u);
  EXPECT_EQ(batch[0]->batch_rows, 3);
}

}  // namespace
}  // namespace manypy
