// Run to completion (Dispatcher::SubmitOrRunHere) with fake models: which
// requests run on the submitting thread and which go to the queue, and that
// a call run here is an execution like any other (counted once, limited,
// interrupted, never beside another call in its interpreter). No timing:
// every wait is for a state the dispatcher reaches.
#include <gtest/gtest.h>

#include <thread>

#include "server/inference/batching_scheduler.h"
#include "server/inference/dispatcher.h"
#include "tests/test_util/fake_executable.h"
#include "tests/test_util/request_builder.h"

namespace manypy {
namespace {

using namespace std::chrono_literals;
using testing::Answers;
using testing::FakeExecutable;
using testing::MakeRequest;

std::shared_ptr<DispatchedModel> MakeModel(const std::string& name, std::shared_ptr<Executable> exe,
                                           size_t instances = 1, bool batching = false,
                                           std::chrono::microseconds limit = 60s,
                                           int64_t delay_us = 0) {
  Manifest m;
  m.name = name;
  m.max_batch_size = 16;
  m.inputs = {{"IN", "FP32", {2}}};
  m.outputs = {{"OUT", "FP32", {2}}};
  std::unique_ptr<Scheduler> s;
  if (batching) {
    BatchingSpec spec;
    spec.dynamic = true;
    spec.max_queue_delay_microseconds = delay_us;
    s = std::make_unique<BatchingScheduler>(name, 1000, m.max_batch_size, spec);
  } else {
    s = std::make_unique<FifoScheduler>(name, 1000);
  }
  return std::make_shared<DispatchedModel>(m, ModelLimits{instances, limit, {}}, std::move(s),
                                           std::move(exe));
}

// Records the thread that answered each request.
struct Answerers {
  std::mutex mu;
  std::vector<std::thread::id> ids;
  std::vector<std::thread::id> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return ids;
  }
};

RequestPtr Tracked(std::shared_ptr<Answers> answers, float value, Answerers* answerers) {
  RequestPtr r = MakeRequest(std::move(answers), value);
  r->reply = [answerers, reply = std::move(r->reply)](const Status& s) {
    {
      std::lock_guard<std::mutex> lock(answerers->mu);
      answerers->ids.push_back(std::this_thread::get_id());
    }
    reply(s);
  };
  return r;
}

Dispatcher::Options Always(size_t slots) {
  Dispatcher::Options o;
  o.slots = slots;
  o.run_here_below = std::chrono::hours(1);  // every model counts as quick
  return o;
}

// Every slot's worker waits for work (a fresh dispatcher's may not have looked yet).
void WaitUntilIdle(Dispatcher& d) {
  for (size_t s = 0; s < d.slots(); ++s) {
    while (!d.TEST_SlotIdle(s)) std::this_thread::yield();
  }
}

// One call through the queue, so that the model's recent execution time is known.
void Warm(Dispatcher& d, const std::shared_ptr<DispatchedModel>& m) {
  auto answers = std::make_shared<Answers>();
  ASSERT_EQ(d.Submit(m, MakeRequest(answers, 1)), nullptr);
  ASSERT_TRUE(answers->Wait(1));
  WaitUntilIdle(d);
}

TEST(DispatcherRunHereTest, AQuickModelRunsOnTheCallingThreadWhenAnInterpreterIsIdle) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(2));
  auto m = MakeModel("m", fake, 2);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 3, &answerers)), nullptr);
  // Answered before SubmitOrRunHere returned, by this thread.
  ASSERT_EQ(answers->Get().size(), 1u);
  EXPECT_EQ(answerers.Get()[0], std::this_thread::get_id());
  ASSERT_TRUE(answers->Get()[0].status.ok());
  EXPECT_EQ(answers->Get()[0].outputs[0].to_tensor()[0][0].item<float>(), 6);
  // Counted once, as any execution (the warm-up's and this one).
  EXPECT_EQ(m->stats().execution_count.load(), 2u);
  EXPECT_EQ(m->stats().success_count.load(), 2u);
}

TEST(DispatcherRunHereTest, AModelNotYetRunGoesToAWorker) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(1));
  auto m = MakeModel("m", fake);
  d.Add(m);
  WaitUntilIdle(d);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
  ASSERT_TRUE(answers->Wait(1));
  EXPECT_NE(answerers.Get()[0], std::this_thread::get_id());
}

TEST(DispatcherRunHereTest, AModelWhoseCallsTakeLongerThanTheBoundGoesToAWorker) {
  auto fake = std::make_shared<FakeExecutable>(2.0, 5ms);
  Dispatcher::Options o;
  o.slots = 1;
  o.run_here_below = 1ms;  // its calls sleep 5 ms
  Dispatcher d(o);
  auto m = MakeModel("m", fake);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
  ASSERT_TRUE(answers->Wait(1));
  EXPECT_NE(answerers.Get()[0], std::this_thread::get_id());
}

// The quiet rule (Options::run_here_quiet): a request that comes while an
// execution ended just now (here: within the hour) goes to a worker; one that
// comes after the quiet time runs here.
TEST(DispatcherRunHereTest, ARequestRightAfterAnExecutionEndedGoesToAWorker) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher::Options o = Always(2);
  o.run_here_quiet = std::chrono::hours(1);
  Dispatcher d(o);
  auto m = MakeModel("m", fake, 2);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
  ASSERT_TRUE(answers->Wait(1));
  EXPECT_NE(answerers.Get()[0], std::this_thread::get_id());
  EXPECT_TRUE(answers->Get()[0].status.ok());
  EXPECT_EQ(m->stats().success_count.load(), 2u);  // counted once, as ever
}

TEST(DispatcherRunHereTest, ARequestAfterTheQuietTimeRunsHere) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher::Options o = Always(2);
  o.run_here_quiet = 1ms;
  Dispatcher d(o);
  auto m = MakeModel("m", fake, 2);
  d.Add(m);
  Warm(d, m);
  std::this_thread::sleep_for(5ms);  // longer than the quiet time since the warm-up ended
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
  ASSERT_EQ(answers->Get().size(), 1u);  // answered before SubmitOrRunHere returned
  EXPECT_EQ(answerers.Get()[0], std::this_thread::get_id());
}

// ... and nothing runs here beside a running call: the request goes to a
// worker even after the quiet time.
TEST(DispatcherRunHereTest, WhileAnotherCallRunsARequestGoesToAWorker) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher::Options o = Always(2);
  o.run_here_quiet = 1ms;
  Dispatcher d(o);
  auto m = MakeModel("m", fake, 2);
  d.Add(m);
  Warm(d, m);
  auto first = std::make_shared<Answers>();  // spins on a worker until released
  ASSERT_EQ(d.Submit(m, MakeRequest(first, FakeExecutable::hang_value)), nullptr);
  while (fake->running_.load() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(5ms);  // longer than the quiet time since the warm-up ended
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  std::thread::id submitter_id;
  std::thread submitter([&] {
    submitter_id = std::this_thread::get_id();
    EXPECT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 2, &answerers)), nullptr);
  });
  ASSERT_TRUE(answers->Wait(1));  // by the other worker, the first call still running
  submitter.join();
  EXPECT_NE(answerers.Get()[0], submitter_id);
  fake->release_ = true;
  ASSERT_TRUE(first->Wait(1));
}

TEST(DispatcherRunHereTest, ABoundOfZeroNeverRunsHere) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher::Options o;
  o.slots = 1;
  o.run_here_below = 0us;
  Dispatcher d(o);
  auto m = MakeModel("m", fake);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
  ASSERT_TRUE(answers->Wait(1));
  EXPECT_NE(answerers.Get()[0], std::this_thread::get_id());
}

TEST(DispatcherRunHereTest, AtItsInstanceLimitARequestQueuesBehindTheOthersInOrder) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(2));
  auto m = MakeModel("m", fake, /*instances=*/1);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  ASSERT_EQ(d.Submit(m, MakeRequest(answers, FakeExecutable::hang_value)), nullptr);
  while (fake->running_ == 0) std::this_thread::yield();
  ASSERT_EQ(d.Submit(m, MakeRequest(answers, 2)), nullptr);          // queued: the limit
  ASSERT_EQ(d.SubmitOrRunHere(m, MakeRequest(answers, 3)), nullptr);  // behind it, not here
  EXPECT_TRUE(answers->Get().empty());
  fake->release_ = true;
  ASSERT_TRUE(answers->Wait(3));
  auto got = answers->Get();
  EXPECT_EQ(got[1].outputs[0].to_tensor()[0][0].item<float>(), 4);
  EXPECT_EQ(got[2].outputs[0].to_tensor()[0][0].item<float>(), 6);
  EXPECT_EQ(fake->max_running_.load(), 1);
}

TEST(DispatcherRunHereTest, ABatchingModelsRequestsGatherAsInTheQueue) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(2));
  // Batches gather for an hour while one of its executions runs.
  auto m = MakeModel("m", fake, 2, /*batching=*/true, 60s, /*delay_us=*/3'600'000'000);
  d.Add(m);
  Warm(d, m);  // idle: a lone request is a batch of one at once
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
  ASSERT_EQ(answers->Get().size(), 1u);  // idle again: at once, here
  EXPECT_EQ(answerers.Get()[0], std::this_thread::get_id());
  ASSERT_EQ(d.Submit(m, MakeRequest(answers, FakeExecutable::hang_value)), nullptr);
  while (fake->running_ == 0) std::this_thread::yield();
  // One call running: this one gathers, here as in the queue.
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 2, &answerers)), nullptr);
  EXPECT_EQ(answers->Get().size(), 1u);
  fake->release_ = true;  // idle again: the gathered batch starts on a worker
  ASSERT_TRUE(answers->Wait(3));
  EXPECT_NE(answerers.Get()[1], std::this_thread::get_id());
}

TEST(DispatcherRunHereTest, AnExpiredRequestIsAnsweredByItsQueueAndNeverRuns) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(1));
  auto m = MakeModel("m", fake);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  RequestPtr r = MakeRequest(answers, 1);
  r->deadline = Clock::now() - 1ms;
  ASSERT_EQ(d.SubmitOrRunHere(m, std::move(r)), nullptr);
  ASSERT_TRUE(answers->Wait(1));
  EXPECT_EQ(answers->Get()[0].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(fake->calls_.load(), 1);  // the warm-up's only
}

TEST(DispatcherRunHereTest, ACallRunHerePastItsLimitIsInterruptedByTheWatchdog) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(1));
  auto m = MakeModel("stuck", fake, 1, false, /*limit=*/100ms);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  ASSERT_EQ(d.SubmitOrRunHere(m, Tracked(answers, FakeExecutable::hang_value, &answerers)), nullptr);
  ASSERT_EQ(answers->Get().size(), 1u);
  EXPECT_EQ(answerers.Get()[0], std::this_thread::get_id());
  EXPECT_EQ(answers->Get()[0].status.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(answers->Get()[0].status.message().find("execution limit of 0.1 s"), std::string::npos)
      << answers->Get()[0].status.message();
  EXPECT_EQ(m->stats().fail_count.load(), 1u);
}

TEST(DispatcherRunHereTest, ALentSlotsWorkerStartsNothingThereUntilItIsReturned) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(1));
  auto m = MakeModel("m", fake, 1);
  auto other = MakeModel("other", fake, 1);
  d.Add(m);
  d.Add(other);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  std::thread here([&] {
    EXPECT_EQ(d.SubmitOrRunHere(m, MakeRequest(answers, FakeExecutable::hang_value)), nullptr);
  });
  while (fake->running_ == 0) std::this_thread::yield();
  // Queued for the one interpreter, which runs the call above: it waits.
  ASSERT_EQ(d.Submit(other, MakeRequest(answers, 2)), nullptr);
  fake->release_ = true;
  here.join();
  ASSERT_TRUE(answers->Wait(2));
  EXPECT_EQ(fake->max_running_.load(), 1);  // never two calls in one interpreter
}

TEST(DispatcherRunHereTest, AHeldSlotIsNotLent) {
  auto fake = std::make_shared<FakeExecutable>(2.0);
  Dispatcher d(Always(1));
  auto m = MakeModel("m", fake);
  d.Add(m);
  Warm(d, m);
  auto answers = std::make_shared<Answers>();
  Answerers answerers;
  d.RunOnSlot(0, [&] {
    EXPECT_EQ(d.SubmitOrRunHere(m, Tracked(answers, 1, &answerers)), nullptr);
    EXPECT_TRUE(answers->Get().empty());  // queued for the held slot
  });
  ASSERT_TRUE(answers->Wait(1));
  EXPECT_NE(answerers.Get()[0], std::this_thread::get_id());
}

}  // namespace
}  // namespace manypy
