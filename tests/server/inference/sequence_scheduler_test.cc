// SequenceScheduler on its own: each refusal, slot binding, order within a
// sequence, the concurrency limit, ends and idle timeouts (no threads); then
// under the Dispatcher with a fake model: slots and state drops. No Python.
#include "server/inference/sequence_scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <thread>

#include "server/inference/dispatcher.h"
#include "tests/test_util/request_builder.h"

namespace manypy {
namespace {

using testing::Answers;
using testing::MakeRequest;

constexpr auto kNever = Clock::time_point::max();

struct Seq {
  Value id;
  bool start = false;
  bool end = false;
};

RequestPtr SeqRequest(const std::shared_ptr<Answers>& answers, Seq s, float value = 0) {
  RequestPtr r = MakeRequest(answers, value);
  Value::DictItems p;
  if (!s.id.is_none()) p.emplace_back(Value("sequence_id"), s.id);
  if (s.start) p.emplace_back(Value("sequence_start"), Value(true));
  if (s.end) p.emplace_back(Value("sequence_end"), Value(true));
  r->parameters = Value::Dict(std::move(p));
  return r;
}

SequenceBatchingSpec Spec(int64_t idle_us = 1000000, int64_t max_sequences = 256) {
  SequenceBatchingSpec s;
  s.enabled = true;
  s.max_sequence_idle_microseconds = idle_us;
  s.max_concurrent_sequences = max_sequences;
  return s;
}

class SequenceSchedulerTest : public ::testing::Test {
 protected:
  Status Send(Seq s, float value = 0) {
    RequestPtr r = SeqRequest(answers_, std::move(s), value);
    return scheduler_.Enqueue(&r);
  }
  // Next on `slot`, run to its end at once: the value it carried, or -1 for none.
  float RunOn(size_t slot) {
    Clock::time_point wake = kNever;
    auto one = scheduler_.Next(slot, Clock::now(), true, &wake);
    if (one.empty()) return -1;
    EXPECT_EQ(one.size(), 1u);
    float v = one[0]->inputs[0].to_tensor()[0][0].item<float>();
    ended_ = scheduler_.ExecutionEnded(slot, Clock::now());
    return v;
  }

  std::shared_ptr<Answers> answers_ = std::make_shared<Answers>();
  SequenceScheduler scheduler_{"gru", 64, Spec()};
  std::vector<std::string> ended_;  // the states the last execution's end drops
};

TEST_F(SequenceSchedulerTest, RefusesARequestWithoutSequenceId) {
  Status s = Send({});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("model 'gru'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("sequence_id"), std::string::npos) << s.message();
  EXPECT_EQ(Send({Value(int64_t{0}), true}).code(), StatusCode::kInvalidArgument);  // 0: none
  EXPECT_EQ(Send({Value(1.5), true}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(scheduler_.queued(), 0u);
}

TEST_F(SequenceSchedulerTest, RefusesASequenceNeverStartedEndedOrTimedOutSayingWhich) {
  Status never = Send({Value(int64_t{7})});
  EXPECT_EQ(never.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(never.message().find("sequence 7 of model 'gru' was never started"), std::string::npos)
      << never.message();

  ASSERT_TRUE(Send({Value(int64_t{8}), true, true}).ok());
  EXPECT_EQ(RunOn(0), 0);
  EXPECT_EQ(ended_, std::vector<std::string>{"8"});  // its state goes
  Status ended = Send({Value(int64_t{8})});
  EXPECT_NE(ended.message().find("sequence 8 of model 'gru' has already ended"), std::string::npos)
      << ended.message();

  SequenceScheduler quick("gru", 64, Spec(/*idle_us=*/1000));
  RequestPtr r = SeqRequest(answers_, {Value("abc"), true});
  ASSERT_TRUE(quick.Enqueue(&r).ok());
  Clock::time_point wake = kNever;
  ASSERT_EQ(quick.Next(1, Clock::now(), true, &wake).size(), 1u);
  quick.ExecutionEnded(1, Clock::now());
  std::vector<Scheduler::ClosedSequence> closed;
  quick.CloseIdle(Clock::now(), &closed, &wake);
  EXPECT_TRUE(closed.empty());  // not idle long enough yet
  EXPECT_LT(wake, kNever);      // but the watchdog knows when
  quick.CloseIdle(Clock::now() + std::chrono::milliseconds(5), &closed, &wake);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].key, "'abc'");
  EXPECT_TRUE(closed[0].bound);
  EXPECT_EQ(closed[0].slot, 1u);
  r = SeqRequest(answers_, {Value("abc")});
  Status timed_out = quick.Enqueue(&r);
  EXPECT_EQ(timed_out.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(timed_out.message().find("sequence 'abc' of model 'gru' timed out"), std::string::npos)
      << timed_out.message();
  EXPECT_NE(timed_out.message().find("max_sequence_idle_microseconds 1000"), std::string::npos);
  // Started again, it is a new sequence.
  r = SeqRequest(answers_, {Value("abc"), true});
  EXPECT_TRUE(quick.Enqueue(&r).ok());
}

TEST_F(SequenceSchedulerTest, RefusesAStartOfAnActiveSequence) {
  ASSERT_TRUE(Send({Value(int64_t{3}), true}).ok());
  Status again = Send({Value(int64_t{3}), true});
  EXPECT_EQ(again.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(again.message().find("is already active"), std::string::npos) << again.message();
}

TEST_F(SequenceSchedulerTest, RefusesAStartBeyondTheLimitNamingIt) {
  SequenceScheduler two("gru", 64, Spec(1000000, /*max_sequences=*/2));
  for (int64_t id : {1, 2}) {
    RequestPtr r = SeqRequest(answers_, {Value(id), true});
    ASSERT_TRUE(two.Enqueue(&r).ok());
  }
  RequestPtr r = SeqRequest(answers_, {Value(int64_t{3}), true});
  Status full = two.Enqueue(&r);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("max_concurrent_sequences 2"), std::string::npos) << full.message();
  ASSERT_NE(r, nullptr);  // left with the caller, to be answered
  // An end frees a place.
  r = SeqRequest(answers_, {Value(int64_t{1}), false, true});
  ASSERT_TRUE(two.Enqueue(&r).ok());
  Clock::time_point wake = kNever;
  ASSERT_EQ(two.Next(0, Clock::now(), true, &wake).size(), 1u);  // 1's start
  two.ExecutionEnded(0, Clock::now());
  ASSERT_EQ(two.Next(0, Clock::now(), true, &wake).size(), 1u);  // 2's start
  two.ExecutionEnded(0, Clock::now());
  ASSERT_EQ(two.Next(0, Clock::now(), true, &wake).size(), 1u);  // 1's end
  r = SeqRequest(answers_, {Value(int64_t{3}), true});
  EXPECT_TRUE(two.Enqueue(&r).ok());
}

TEST_F(SequenceSchedulerTest, RefusesARequestAfterAQueuedEnd) {
  ASSERT_TRUE(Send({Value(int64_t{4}), true}).ok());
  ASSERT_TRUE(Send({Value(int64_t{4}), false, true}).ok());
  Status after = Send({Value(int64_t{4})});
  EXPECT_NE(after.message().find("has already ended"), std::string::npos) << after.message();
}

TEST_F(SequenceSchedulerTest, BindsEachSequenceToTheSlotOfItsStartAndKeepsOrder) {
  ASSERT_TRUE(Send({Value(int64_t{1}), true}, 10).ok());
  ASSERT_TRUE(Send({Value(int64_t{2}), true}, 20).ok());
  ASSERT_TRUE(Send({Value(int64_t{1})}, 11).ok());
  ASSERT_TRUE(Send({Value(int64_t{2})}, 21).ok());
  ASSERT_TRUE(Send({Value(int64_t{1}), false, true}, 12).ok());
  EXPECT_EQ(RunOn(0), 10);  // sequence 1 binds to slot 0
  EXPECT_EQ(RunOn(1), 20);  // sequence 2, to slot 1
  EXPECT_EQ(RunOn(1), 21);  // slot 1 never takes sequence 1's
  EXPECT_EQ(RunOn(1), -1);
  EXPECT_EQ(RunOn(0), 11);
  EXPECT_EQ(RunOn(0), 12);
  EXPECT_EQ(ended_, std::vector<std::string>{"1"});
  EXPECT_EQ(scheduler_.active(), 1u);
}

TEST_F(SequenceSchedulerTest, RunsOneRequestOfASequenceAtATime) {
  ASSERT_TRUE(Send({Value(int64_t{1}), true}, 10).ok());
  ASSERT_TRUE(Send({Value(int64_t{1})}, 11).ok());
  ASSERT_TRUE(Send({Value(int64_t{2}), true}, 20).ok());
  Clock::time_point wake = kNever;
  auto first = scheduler_.Next(0, Clock::now(), true, &wake);
  ASSERT_EQ(first.size(), 1u);
  // While 10 runs on slot 0, slot 1 may start sequence 2 but not 1's next.
  auto other = scheduler_.Next(1, Clock::now(), true, &wake);
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0]->inputs[0].to_tensor()[0][0].item<float>(), 20);
  scheduler_.ExecutionEnded(1, Clock::now());
  EXPECT_TRUE(scheduler_.Next(1, Clock::now(), true, &wake).empty());
  scheduler_.ExecutionEnded(0, Clock::now());
  EXPECT_EQ(RunOn(0), 11);
}

TEST_F(SequenceSchedulerTest, NeverTimesOutASequenceWithWorkQueuedOrRunning) {
  SequenceScheduler quick("gru", 64, Spec(/*idle_us=*/1));
  RequestPtr r = SeqRequest(answers_, {Value(int64_t{5}), true});
  ASSERT_TRUE(quick.Enqueue(&r).ok());
  std::vector<Scheduler::ClosedSequence> closed;
  Clock::time_point wake = kNever;
  auto later = Clock::now() + std::chrono::seconds(1);
  quick.CloseIdle(later, &closed, &wake);  // queued
  EXPECT_TRUE(closed.empty());
  ASSERT_EQ(quick.Next(0, later, true, &wake).size(), 1u);
  quick.CloseIdle(later + std::chrono::seconds(1), &closed, &wake);  // running
  EXPECT_TRUE(closed.empty());
  quick.ExecutionEnded(0, later);
  quick.CloseIdle(later + std::chrono::seconds(1), &closed, &wake);
  EXPECT_EQ(closed.size(), 1u);
}

TEST_F(SequenceSchedulerTest, ForgetsTheOldestClosedIdsBeyondItsMemory) {
  for (size_t i = 1; i <= SequenceScheduler::kRememberedClosed + 1; ++i) {
    ASSERT_TRUE(Send({Value(static_cast<int64_t>(i)), true, true}).ok());
    RunOn(0);
  }
  Status first = Send({Value(int64_t{1})});
  EXPECT_NE(first.message().find("never started (or ended too long ago"), std::string::npos)
      << first.message();
  Status last = Send({Value(static_cast<int64_t>(SequenceScheduler::kRememberedClosed + 1))});
  EXPECT_NE(last.message().find("has already ended"), std::string::npos) << last.message();
}

TEST_F(SequenceSchedulerTest, ReadsUnsignedIdsAndRefusesNonBoolFlags) {
  RequestPtr r = SeqRequest(answers_, {Value(int64_t{-1}), true});  // uint64 max on the wire
  auto p = SequenceScheduler::ParamsOf(*r, "gru");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->key, "18446744073709551615");
  r->parameters = Value::Dict(
      {{Value("sequence_id"), Value(int64_t{1})}, {Value("sequence_start"), Value(int64_t{1})}});
  EXPECT_EQ(SequenceScheduler::ParamsOf(*r, "gru").status().code(), StatusCode::kInvalidArgument);
}

// Records on which slot each value ran and which states were dropped where.
class RecordingModel final : public Executable {
 public:
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook*) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let requests overlap
    std::lock_guard<std::mutex> lock(mu_);
    ran_.emplace_back(slot, inputs[0].to_tensor()[0][0].item<float>());
    return inputs;
  }
  void DropSequenceStates(size_t slot, const std::vector<std::string>& keys) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& k : keys) dropped_[k].push_back(slot);
  }
  std::vector<std::pair<size_t, float>> ran() {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }
  std::map<std::string, std::vector<size_t>> dropped() {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<size_t, float>> ran_;
  std::map<std::string, std::vector<size_t>> dropped_;
};

TEST(SequenceDispatchTest, ASequenceRunsInOrderOnOneSlotAndItsStateIsDroppedThere) {
  auto model = std::make_shared<RecordingModel>();
  Manifest m;
  m.name = "gru";
  m.inputs = {{"IN", "FP32", {2}}};
  m.outputs = {{"OUT", "FP32", {2}}};
  SequenceBatchingSpec spec = Spec(/*idle_us=*/50000);
  ModelLimits limits{3, std::chrono::seconds(60), spec};
  auto q = std::make_shared<DispatchedModel>(
      m, limits, std::make_unique<SequenceScheduler>("gru", 100, spec), model);
  Dispatcher d({3});
  d.Add(q);
  auto answers = std::make_shared<Answers>();
  // Sequence 1 carries 10, 11, ..., sequence 2 20, 21, ...: sent all at once.
  const int n = 6;
  for (int i = 0; i < n; ++i) {
    bool first = i == 0, last = i == n - 1;
    ASSERT_EQ(d.Submit(q, SeqRequest(answers, {Value(int64_t{1}), first, last}, 10 + i)), nullptr);
    ASSERT_EQ(d.Submit(q, SeqRequest(answers, {Value(int64_t{2}), first}, 20 + i)), nullptr);
  }
  ASSERT_TRUE(answers->Wait(2 * n));
  for (const auto& a : answers->Get()) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  std::map<int, std::vector<std::pair<size_t, float>>> by_sequence;
  for (const auto& [slot, v] : model->ran())
    by_sequence[static_cast<int>(v) / 10].emplace_back(slot, v);
  for (int s : {1, 2}) {
    const auto& runs = by_sequence[s];
    ASSERT_EQ(runs.size(), static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(runs[i].first, runs[0].first) << "sequence " << s << " moved slots";
      EXPECT_EQ(runs[i].second, 10 * s + i) << "sequence " << s << " out of order";
    }
  }
  // 1 ended: its state went on its own slot; 2 is dropped there once idle.
  for (int tries = 0; tries < 500 && model->dropped().count("2") == 0; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto dropped = model->dropped();
  EXPECT_EQ(dropped["1"], std::vector<size_t>{by_sequence[1][0].first});
  EXPECT_EQ(dropped["2"], std::vector<size_t>{by_sequence[2][0].first});
  ASSERT_TRUE(d.Drain(Clock::now() + std::chrono::seconds(5)));
}

}  // namespace
}  // namespace manypy
