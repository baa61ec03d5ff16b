// The watchdog's decisions without threads or a clock, as the schedulers are
// tested: executions past their limit, executions no client waits for, the
// grace a stream gets to reach its next yield, and when to look again.
#include "server/inference/watchdog.h"

#include <gtest/gtest.h>

#include <atomic>

namespace manypy {
namespace {

using namespace std::chrono_literals;

const Clock::time_point kStart = Clock::time_point() + 1000s;

struct Client {
  std::shared_ptr<std::atomic<bool>> left = std::make_shared<std::atomic<bool>>(false);
};

// A running execution of one request whose client waits until `client_deadline`.
ExecutionPtr Running(const Client& client, Clock::time_point client_deadline,
                     Clock::time_point interrupt_at = Clock::time_point::max(), bool streaming = false,
                     bool interruptible = true) {
  auto e = std::make_shared<Execution>();
  auto r = std::make_unique<InferenceRequest>();
  r->client_deadline = client_deadline;
  r->cancelled = [left = client.left] { return left->load(); };
  e->requests.push_back(std::move(r));
  e->deadline = client_deadline;
  e->interrupt_at = interrupt_at;
  e->streaming = streaming;
  e->interruptible = interruptible;
  return e;
}

TEST(WatchdogTest, NothingRunningLooksAgainAfterAPeriod) {
  WatchdogTimes times;
  WatchdogLook look = LookForOverdue({}, kStart, times);
  EXPECT_TRUE(look.overdue.empty());
  EXPECT_EQ(look.wake, kStart + times.period);
}

TEST(WatchdogTest, AnExecutionPastItsLimitIsOverdueAndInterruptedAgainLater) {
  Client client;
  WatchdogTimes times;
  auto e = Running(client, kStart + 60s, kStart + 2s);
  std::set<ExecutionPtr> running{e};

  WatchdogLook before = LookForOverdue(running, kStart + 1s, times);
  EXPECT_TRUE(before.overdue.empty());
  EXPECT_EQ(before.wake, kStart + 1s + times.period);

  WatchdogLook at = LookForOverdue(running, kStart + 2s, times);
  ASSERT_EQ(at.overdue.size(), 1u);
  EXPECT_FALSE(e->no_one_waits) << "its limit, not its clients";
  EXPECT_EQ(e->interrupt_at, kStart + 2s + times.reinterrupt_interval);

  // It caught the interrupt and runs on: interrupted again at the interval.
  EXPECT_TRUE(LookForOverdue(running, kStart + 2500ms, times).overdue.empty());
  EXPECT_EQ(LookForOverdue(running, kStart + 3s, times).overdue.size(), 1u);
}

TEST(WatchdogTest, WakesForTheNearestLimitOrClientDeadline) {
  Client a, b;
  WatchdogTimes times;
  std::set<ExecutionPtr> running{Running(a, kStart + 50ms), Running(b, kStart + 60s, kStart + 30ms)};
  EXPECT_EQ(LookForOverdue(running, kStart, times).wake, kStart + 30ms);
}

TEST(WatchdogTest, AnExecutionWhoseClientLeftIsInterruptedAtOnce) {
  Client client;
  WatchdogTimes times;
  auto e = Running(client, kStart + 60s);
  std::set<ExecutionPtr> running{e};
  EXPECT_TRUE(LookForOverdue(running, kStart, times).overdue.empty());

  client.left->store(true);
  WatchdogLook look = LookForOverdue(running, kStart + 1ms, times);
  ASSERT_EQ(look.overdue.size(), 1u);
  EXPECT_TRUE(e->no_one_waits);
  EXPECT_EQ(e->interrupt_at, kStart + 1ms + times.reinterrupt_interval);
  // From then on only its interrupt time counts: not overdue again before it.
  EXPECT_TRUE(LookForOverdue(running, kStart + 2ms, times).overdue.empty());
}

TEST(WatchdogTest, AnExecutionPastItsClientsDeadlineIsInterrupted) {
  Client client;
  auto e = Running(client, kStart + 10ms);
  std::set<ExecutionPtr> running{e};
  EXPECT_TRUE(LookForOverdue(running, kStart + 9ms, {}).overdue.empty());
  EXPECT_EQ(LookForOverdue(running, kStart + 10ms, {}).overdue.size(), 1u);
  EXPECT_TRUE(e->no_one_waits);
}

TEST(WatchdogTest, OneClientStillWaitingKeepsABatchRunning) {
  Client gone, waiting;
  auto e = Running(gone, kStart + 60s);
  auto r = std::make_unique<InferenceRequest>();
  r->client_deadline = kStart + 60s;
  r->cancelled = [left = waiting.left] { return left->load(); };
  e->requests.push_back(std::move(r));
  gone.left->store(true);
  EXPECT_FALSE(NoOneWaits(*e, kStart));
  EXPECT_TRUE(LookForOverdue({e}, kStart, {}).overdue.empty());
  waiting.left->store(true);
  EXPECT_TRUE(NoOneWaits(*e, kStart));
}

TEST(WatchdogTest, AStreamWhoseClientLeftGetsAGraceToReachItsNextYield) {
  Client client;
  WatchdogTimes times;
  auto e = Running(client, kStart + 60s, Clock::time_point::max(), /*streaming=*/true);
  std::set<ExecutionPtr> running{e};
  client.left->store(true);
  EXPECT_TRUE(LookForOverdue(running, kStart, times).overdue.empty()) << "grace starts";
  EXPECT_EQ(e->no_one_waits_since, kStart);
  EXPECT_TRUE(LookForOverdue(running, kStart + times.stream_close_grace - 1ms, times).overdue.empty());
  EXPECT_EQ(LookForOverdue(running, kStart + times.stream_close_grace, times).overdue.size(), 1u);
  EXPECT_TRUE(e->no_one_waits);
}

TEST(WatchdogTest, CallsThatCannotBeInterruptedAreNotWatchedForTheirClients) {
  Client client;
  auto e = Running(client, kStart + 10ms, kStart + 60s, false, /*interruptible=*/false);
  client.left->store(true);
  WatchdogLook look = LookForOverdue({e}, kStart + 1s, {});
  EXPECT_TRUE(look.overdue.empty());
  EXPECT_FALSE(e->no_one_waits);
  EXPECT_EQ(look.wake, kStart + 1s + WatchdogTimes().period) << "its client deadline is not a reason to wake";
  EXPECT_EQ(LookForOverdue({e}, kStart + 60s, {}).overdue.size(), 1u) << "its limit still counts";
}

TEST(WatchdogTest, AnsweredExecutionsAreLeftAlone) {
  Client client;
  auto e = Running(client, kStart + 10ms, kStart);
  e->answered = true;
  EXPECT_TRUE(LookForOverdue({e}, kStart + 1s, {}).overdue.empty());
}

}  // namespace
}  // namespace manypy

namespace manypy {
namespace {

// The hook the watchdog fires: a fire before Arm (the deadline passed just
// before the call started) interrupts as soon as the call arms it, once.
TEST(InterruptHookTest, AFireBeforeArmingActsWhenArmed) {
  InterruptHook hook;
  int interrupts = 0;
  hook.Fire();
  EXPECT_TRUE(hook.fired());
  hook.Arm([&] { ++interrupts; });
  EXPECT_EQ(interrupts, 1);
  hook.Disarm();
  EXPECT_EQ(interrupts, 1);
}

TEST(InterruptHookTest, UnfiredArmingInterruptsNothingAndEachFireActs) {
  InterruptHook hook;
  int interrupts = 0;
  hook.Arm([&] { ++interrupts; });
  EXPECT_EQ(interrupts, 0);
  hook.Fire();
  hook.Fire();  // the watchdog's repeat
  EXPECT_EQ(interrupts, 2);
  hook.Disarm();
  hook.Fire();  // disarmed (a stream waiting for its client): nothing now
  EXPECT_EQ(interrupts, 2);
  hook.Arm([&] { ++interrupts; });  // the stream's next step stops at once
  EXPECT_EQ(interrupts, 3);
}

}  // namespace
}  // namespace manypy
