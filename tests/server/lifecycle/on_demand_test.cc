// On-demand loading and the memory budget with fake models (no Python, no
// sockets): one load however many first requests, a failed load answering
// every waiter, deadlines while waiting, metadata without a load, eviction
// order, pinned and busy models never evicted, refusals naming the budget,
// room for a first load's measured heap made before its warm-up.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "server/lifecycle/memory_budget.h"
#include "server/lifecycle/model_manager.h"
#include "tests/package_format/test_zip.h"
#include "tests/test_util/fake_loader.h"
#include "tests/test_util/gate.h"
#include "tests/test_util/request_builder.h"
#include "tests/test_util/test_archives.h"

namespace manypy {
namespace {

using namespace std::chrono_literals;
using testing::Answers;
using testing::FakeLoader;
using testing::Gate;
using testing::MakeRequest;
using testing::TestManifest;

/// Doubles its inputs; pretends to hold `bytes` (shared); a call waits at
/// `gate` when one is given.
class SizedExecutable final : public Executable {
 public:
  SizedExecutable(int64_t bytes, std::shared_ptr<Gate> gate) : bytes_(bytes), gate_(std::move(gate)) {}
  StatusOr<std::vector<Value>> Run(size_t, const std::vector<Value>& inputs, InterruptHook*) override {
    ++running;
    // The warm-up's inputs are zeros: only the test's own requests wait.
    bool warmup = !inputs.empty() && inputs[0].to_tensor().eq(0).all().item<bool>();
    if (gate_ && !warmup) gate_->Pass();
    --running;
    std::vector<Value> out;
    for (const auto& v : inputs) out.emplace_back(v.to_tensor() * 2);
    return out;
  }
  MemoryFootprint Memory() const override { return {bytes_, {0, 0}}; }
  std::atomic<int> running{0};

 private:
  const int64_t bytes_;
  const std::shared_ptr<Gate> gate_;
};

/// Holds `shared` bytes and, once Prepare has loaded it in an interpreter,
/// `per_slot` more there (a model whose Python heap its first load measures);
/// counts its releases; calls `on_run` (when set) with the slot of every call.
class MeasuredExecutable final : public Executable {
 public:
  MeasuredExecutable(int64_t shared, int64_t per_slot) : shared_(shared), per_slot_(per_slot) {}
  Status Prepare(size_t slot) override {
    std::lock_guard<std::mutex> lock(mu_);
    slots_.resize(std::max(slots_.size(), slot + 1));
    slots_[slot] = per_slot_;
    return Status::Ok();
  }
  void Release(size_t) override { ++released; }
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs, InterruptHook*) override {
    if (on_run) on_run(slot);
    std::vector<Value> out;
    for (const auto& v : inputs) out.emplace_back(v.to_tensor() * 2);
    return out;
  }
  MemoryFootprint Memory() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return {shared_, slots_};
  }
  std::function<void(size_t)> on_run;
  std::atomic<int> released{0};

 private:
  const int64_t shared_, per_slot_;
  mutable std::mutex mu_;
  std::vector<int64_t> slots_;  // guarded by mu_
};

class OnDemandTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (load_gate_) load_gate_->Open();
    if (run_gate_) run_gate_->Open();
  }

  void Write(const std::string& name) {
    testing::WriteTestArchive(dir_, name + ".mpk", TestManifest(name, 1));
  }

  bool Start(ModelManager::Options options) {
    dispatcher_ = std::make_unique<Dispatcher>(Dispatcher::Options{2});
    options.repository = dir_.path();
    options.loader = loader_.AsLoader();
    options.interpreters = 2;
    auto created = ModelManager::Create(nullptr, dispatcher_.get(), std::move(options));
    if (!created.ok()) ADD_FAILURE() << created.status().ToString();
    if (created.ok()) manager_ = std::move(*created);
    return manager_ != nullptr;
  }
  static ModelManager::Options OnDemand(BudgetLimits budget = {}, std::vector<std::string> pinned = {}) {
    ModelManager::Options o;
    o.on_demand = true;
    o.budget = budget;
    o.startup_models = std::move(pinned);
    return o;
  }

  /// Acquire, waited for (at most 20 s).
  StatusOr<std::shared_ptr<Model>> AcquireNow(const std::string& name,
                                             Clock::time_point deadline = Clock::time_point::max()) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    StatusOr<std::shared_ptr<Model>> result = Internal("no answer within 20 s");
    manager_->Acquire(name, "", deadline, nullptr, [&](StatusOr<std::shared_ptr<Model>> got) {
      std::lock_guard<std::mutex> lock(mu);
      result = std::move(got);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, 20s, [&] { return done; });
    return result;
  }

  ModelState StateOf(const std::string& name) {
    for (const auto& s : manager_->Index()) {
      if (s.name == name) return s.state;
    }
    return ModelState::kUnavailable;
  }
  std::string ReasonOf(const std::string& name) {
    for (const auto& s : manager_->Index()) {
      if (s.name == name) return s.reason;
    }
    return "";
  }

  testing::TempDir dir_;
  FakeLoader loader_;
  std::shared_ptr<Gate> load_gate_, run_gate_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(OnDemandTest, StartsWithOnlyThePinnedModelsAndListsTheRestAsLoadingOnFirstRequest) {
  Write("pinned");
  Write("lazy");
  ASSERT_TRUE(Start(OnDemand({}, {"pinned"})));
  EXPECT_EQ(loader_.loads(), 1);
  EXPECT_EQ(StateOf("pinned"), ModelState::kReady);
  EXPECT_EQ(StateOf("lazy"), ModelState::kUnavailable);
  EXPECT_EQ(ReasonOf("lazy"), "not loaded; loads on first request");
}

TEST_F(OnDemandTest, ThirtyTwoConcurrentFirstRequestsStartExactlyOneLoad) {
  Write("m");
  load_gate_ = std::make_shared<Gate>(/*open=*/false);
  std::atomic<int> makes{0};
  loader_.set_make([&](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    ++makes;
    load_gate_->Pass();  // every request arrives while the load runs
    return std::shared_ptr<Executable>(std::make_shared<SizedExecutable>(100, nullptr));
  });
  ASSERT_TRUE(Start(OnDemand()));
  auto answers = std::make_shared<Answers>();
  std::vector<std::thread> clients;
  for (int i = 0; i < 32; ++i) {
    clients.emplace_back([&, i] {
      manager_->Acquire("m", "", Clock::now() + 20s, nullptr,
                        [&, i](StatusOr<std::shared_ptr<Model>> got) {
                          if (!got.ok()) {
                            answers->Add({got.status(), {}, {}});
                            return;
                          }
                          EXPECT_EQ((*got)->Infer(MakeRequest(answers, static_cast<float>(i))), nullptr);
                        });
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(StateOf("m"), ModelState::kLoading);
  load_gate_->Open();
  ASSERT_TRUE(answers->Wait(32));
  for (const auto& a : answers->Get()) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(makes.load(), 1);
  EXPECT_EQ(loader_.loads(), 1);
  EXPECT_EQ(StateOf("m"), ModelState::kReady);
}

TEST_F(OnDemandTest, AFailedLoadAnswersEveryWaiterWithItsReasonAndTheNextRequestTriesAgain) {
  Write("broken");
  load_gate_ = std::make_shared<Gate>(/*open=*/false);
  loader_.set_make([&](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    load_gate_->Pass();
    return Internal("ValueError: corrupt weights in broken");
  });
  ASSERT_TRUE(Start(OnDemand()));
  std::mutex mu;
  std::vector<Status> got;
  for (int i = 0; i < 8; ++i) {
    manager_->Acquire("broken", "", Clock::now() + 20s, nullptr,
                      [&](StatusOr<std::shared_ptr<Model>> r) {
                        std::lock_guard<std::mutex> lock(mu);
                        got.push_back(r.status());
                      });
  }
  load_gate_->Open();
  for (auto until = Clock::now() + 10s; Clock::now() < until; std::this_thread::sleep_for(5ms)) {
    std::lock_guard<std::mutex> lock(mu);
    if (got.size() == 8) break;
  }
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(got.size(), 8u);
  for (const auto& s : got) {
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
    EXPECT_NE(s.message().find("corrupt weights"), std::string::npos) << s.message();
  }
  EXPECT_EQ(loader_.loads(), 1);
  EXPECT_NE(ReasonOf("broken").find("corrupt weights"), std::string::npos) << ReasonOf("broken");
  EXPECT_FALSE(AcquireNow("broken").ok());
  EXPECT_EQ(loader_.loads(), 2);
}

TEST_F(OnDemandTest, AWaiterPastItsDeadlineIsAnsweredThenWhileTheLoadGoesOn) {
  Write("slow");
  load_gate_ = std::make_shared<Gate>(/*open=*/false);
  loader_.set_make([&](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    load_gate_->Pass();
    return std::shared_ptr<Executable>(std::make_shared<SizedExecutable>(1, nullptr));
  });
  ASSERT_TRUE(Start(OnDemand()));
  Clock::time_point start = Clock::now();
  auto early = AcquireNow("slow", Clock::now() + 200ms);
  EXPECT_EQ(early.status().code(), StatusCode::kDeadlineExceeded) << early.status().ToString();
  EXPECT_LT(Clock::now() - start, 2s);
  load_gate_->Open();
  EXPECT_TRUE(AcquireNow("slow").ok());
  EXPECT_EQ(loader_.loads(), 1);
}

TEST_F(OnDemandTest, MetadataOfAModelNotLoadedComesFromItsManifestWithoutALoad) {
  Write("lazy");
  ASSERT_TRUE(Start(OnDemand()));
  auto d = manager_->Describe("lazy", "");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->manifest.name, "lazy");
  EXPECT_EQ(d->manifest.inputs.size(), 1u);
  EXPECT_EQ(loader_.loads(), 0);
  EXPECT_EQ(manager_->Describe("lazy", "7").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->Describe("nothing", "").status().code(), StatusCode::kNotFound);
}

TEST_F(OnDemandTest, EvictsTheLeastRecentlyUsedIdleModelAndLoadsItAgainOnItsNextRequest) {
  for (const char* n : {"a", "b", "c"}) Write(n);
  ASSERT_TRUE(Start(OnDemand({0, 2})));
  ASSERT_TRUE(AcquireNow("a").ok());
  ASSERT_TRUE(AcquireNow("b").ok());
  ASSERT_TRUE(AcquireNow("a").ok());  // b is now the least recently used
  ASSERT_TRUE(AcquireNow("c").ok());
  EXPECT_EQ(StateOf("a"), ModelState::kReady);
  EXPECT_EQ(StateOf("b"), ModelState::kUnavailable);
  EXPECT_NE(ReasonOf("b").find("evicted (least recently used) to make room for 'c'"), std::string::npos)
      << ReasonOf("b");
  EXPECT_EQ(StateOf("c"), ModelState::kReady);
  // b's executable was unloaded (the manager and dispatcher let go of it).
  for (auto until = Clock::now() + 5s; !loader_.Made("b", 1).expired() && Clock::now() < until;)
    std::this_thread::sleep_for(2ms);
  EXPECT_TRUE(loader_.Made("b", 1).expired());
  ASSERT_TRUE(AcquireNow("b").ok());  // a is now the least recently used
  EXPECT_EQ(StateOf("a"), ModelState::kUnavailable);
  EXPECT_EQ(loader_.loads(), 4);
}

// A model's first load is estimated at its archive alone; what its first
// interpreter then measures (its Python heap) is made room for before that
// interpreter's warm-up reads the weights, so the server's resident size does
// not pass the budget by the heap until an eviction after it.
TEST_F(OnDemandTest, AFirstLoadEvictsForWhatItsFirstInterpreterMeasuredBeforeItsWarmUp) {
  for (const char* n : {"old", "new"}) Write(n);
  auto old_model = std::make_shared<MeasuredExecutable>(4000, 0);
  auto new_model = std::make_shared<MeasuredExecutable>(1000, 3000);
  std::atomic<int> old_released_at_first_warm_up{-1};
  new_model->on_run = [&](size_t slot) {
    int unset = -1;
    if (slot == 0) old_released_at_first_warm_up.compare_exchange_strong(unset, old_model->released);
  };
  loader_.set_make([&](const Manifest& m) -> StatusOr<std::shared_ptr<Executable>> {
    return std::shared_ptr<Executable>(m.name == "old" ? old_model : new_model);
  });
  ASSERT_TRUE(Start(OnDemand({10000, 0})));
  ASSERT_TRUE(AcquireNow("old").ok());
  // The estimate (the archive's size) fits beside old; the 1000 + 2 x 3000
  // bytes measured in the first interpreter do not.
  auto estimate = static_cast<int64_t>(std::filesystem::file_size(dir_.File("new.mpk")));
  ASSERT_LT(manager_->ResidentBytes() + estimate, 10000);
  ASSERT_TRUE(AcquireNow("new").ok());
  EXPECT_EQ(StateOf("old"), ModelState::kUnavailable);
  EXPECT_EQ(old_released_at_first_warm_up.load(), 2);  // both of old's interpreters, before
  EXPECT_EQ(manager_->ResidentBytes(), 7000);
}

TEST_F(OnDemandTest, APinnedModelIsNeverEvicted) {
  for (const char* n : {"pinned", "a", "b"}) Write(n);
  ASSERT_TRUE(Start(OnDemand({0, 2}, {"pinned"})));
  ASSERT_TRUE(AcquireNow("a").ok());
  ASSERT_TRUE(AcquireNow("pinned").ok());  // a is more recent than nothing, pinned most recent
  ASSERT_TRUE(AcquireNow("b").ok());
  EXPECT_EQ(StateOf("pinned"), ModelState::kReady);
  EXPECT_EQ(StateOf("a"), ModelState::kUnavailable);
  // Least recently used now, and still not the one to go.
  ASSERT_TRUE(AcquireNow("a").ok());
  EXPECT_EQ(StateOf("pinned"), ModelState::kReady);
  EXPECT_EQ(StateOf("b"), ModelState::kUnavailable);
}

TEST_F(OnDemandTest, AModelWithQueuedOrRunningWorkIsNeverEvicted) {
  for (const char* n : {"busy", "idle", "new"}) Write(n);
  run_gate_ = std::make_shared<Gate>(/*open=*/false);
  std::shared_ptr<SizedExecutable> busy;
  loader_.set_make([&](const Manifest& m) -> StatusOr<std::shared_ptr<Executable>> {
    auto e = std::make_shared<SizedExecutable>(1, m.name == "busy" ? run_gate_ : nullptr);
    if (m.name == "busy") busy = e;
    return std::shared_ptr<Executable>(e);
  });
  ASSERT_TRUE(Start(OnDemand({0, 2})));
  auto busy_model = AcquireNow("busy");
  ASSERT_TRUE(busy_model.ok());
  ASSERT_TRUE(AcquireNow("idle").ok());  // used after busy: busy is the least recently used
  auto answers = std::make_shared<Answers>();
  for (float v : {1.0f, 2.0f, 3.0f}) EXPECT_EQ((*busy_model)->Infer(MakeRequest(answers, v)), nullptr);
  busy_model = Internal("handle dropped");  // only its work keeps it busy now
  for (auto until = Clock::now() + 5s; busy->running == 0 && Clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  ASSERT_GT(busy->running.load(), 0);
  // The eviction is decided before the load; the load itself then waits for
  // the interpreters busy's calls hold (Dispatcher::RunOnSlot).
  std::thread newcomer([&] { EXPECT_TRUE(AcquireNow("new").ok()); });
  for (auto until = Clock::now() + 5s;
       StateOf("idle") == ModelState::kReady && Clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(StateOf("idle"), ModelState::kUnavailable);
  EXPECT_EQ(StateOf("busy"), ModelState::kReady);
  run_gate_->Open();
  newcomer.join();
  ASSERT_TRUE(answers->Wait(3));
  for (const auto& a : answers->Get()) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(StateOf("busy"), ModelState::kReady);
  EXPECT_EQ(StateOf("new"), ModelState::kReady);
}

// A client's next request (for another model) may arrive before the server
// has let go of its last one: sequential requests alternating between two
// models under --max-loaded-models=1 were refused now and then.
TEST_F(OnDemandTest, ALoadWaitsBrieflyForTheModelItEvictsToFinishItsLastRequest) {
  for (const char* n : {"a", "b"}) Write(n);
  ASSERT_TRUE(Start(OnDemand({0, 1})));
  auto a = AcquireNow("a");  // held: a is busy until the handle goes
  ASSERT_TRUE(a.ok());
  std::thread finish([&] {
    std::this_thread::sleep_for(100ms);
    a = Internal("handle dropped");
  });
  auto b = AcquireNow("b");
  finish.join();
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(StateOf("a"), ModelState::kUnavailable);
}

TEST_F(OnDemandTest, RefusesWithResourceExhaustedNamingTheBudgetWhenNothingCanBeEvicted) {
  for (const char* n : {"pinned", "big"}) Write(n);
  loader_.set_make([](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    return std::shared_ptr<Executable>(std::make_shared<SizedExecutable>(2048, nullptr));
  });
  // The pinned model's archive (about 1 KiB) fits; it then measures 2 KiB.
  ASSERT_TRUE(Start(OnDemand({2500, 0}, {"pinned"})));
  auto refused = AcquireNow("big");
  ASSERT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  const std::string& m = refused.status().message();
  EXPECT_NE(m.find("model 'big' needs"), std::string::npos) << m;
  EXPECT_NE(m.find("budget of 2.4 KiB"), std::string::npos) << m;
  EXPECT_NE(m.find("1 model(s) hold 2.0 KiB (pinned v1 2.0 KiB (pinned))"), std::string::npos) << m;
  EXPECT_EQ(loader_.loads(), 1);  // refused before loading anything
  EXPECT_EQ(StateOf("pinned"), ModelState::kReady);
}

TEST_F(OnDemandTest, ExplicitLoadsCountAgainstTheBudgetAndEvictNothing) {
  for (const char* n : {"a", "b"}) Write(n);
  ModelManager::Options o;
  o.explicit_control = true;
  o.budget = {0, 1};
  ASSERT_TRUE(Start(std::move(o)));
  ASSERT_TRUE(manager_->Load("a").ok());
  Status refused = manager_->Load("b");
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.ToString();
  EXPECT_NE(refused.message().find("--max-loaded-models 1"), std::string::npos) << refused.message();
  EXPECT_EQ(StateOf("a"), ModelState::kReady);
  ASSERT_TRUE(manager_->Unload("a").ok());
  for (auto until = Clock::now() + 5s; manager_->ResidentBytes() > 0 && Clock::now() < until;)
    std::this_thread::sleep_for(2ms);
  EXPECT_TRUE(manager_->Load("b").ok());
}

TEST_F(OnDemandTest, AReloadUnderTheBudgetServesThroughoutAndFailsNoRequest) {
  Write("m");
  Write("other");
  ASSERT_TRUE(Start(OnDemand({0, 2})));
  ASSERT_TRUE(AcquireNow("m").ok());
  ASSERT_TRUE(AcquireNow("other").ok());
  testing::WriteTestArchive(dir_, "m_2.mpk", TestManifest("m", 2));
  auto answers = std::make_shared<Answers>();
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  // As InferWire does: a handle on the version being replaced may give the
  // request back once that version drained; it is looked up again.
  std::function<void(RequestPtr, int)> send = [&](RequestPtr request, int attempt) {
    auto holder = std::make_shared<RequestPtr>(std::move(request));
    manager_->Acquire("m", "", Clock::now() + 20s, nullptr,
                      [&, holder, attempt](StatusOr<std::shared_ptr<Model>> got) {
                        if (!got.ok()) return answers->Add({got.status(), {}, {}});
                        RequestPtr back = (*got)->Infer(std::move(*holder));
                        if (back != nullptr && attempt < 3) return send(std::move(back), attempt + 1);
                        EXPECT_EQ(back, nullptr) << "replaced three times in a row";
                      });
  };
  std::thread traffic([&] {
    while (!stop) {
      send(MakeRequest(answers, 1), 0);
      ++sent;
      std::this_thread::sleep_for(1ms);
    }
  });
  for (auto until = Clock::now() + 5s; sent < 20 && Clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  // Both versions of m must fit for a moment: the idle 'other' makes room.
  Status reloaded = manager_->Load("m");
  int after_reload = sent + 20;
  for (auto until = Clock::now() + 5s; sent < after_reload && Clock::now() < until;)
    std::this_thread::sleep_for(1ms);
  stop = true;
  traffic.join();
  ASSERT_TRUE(reloaded.ok()) << reloaded.ToString();
  ASSERT_TRUE(answers->Wait(static_cast<size_t>(sent.load())));
  for (const auto& a : answers->Get()) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_GE(sent.load(), 40);
  auto serving = AcquireNow("m");
  ASSERT_TRUE(serving.ok());
  EXPECT_EQ((*serving)->version(), 2);
  EXPECT_EQ(StateOf("other"), ModelState::kUnavailable);
  EXPECT_EQ(loader_.loads(), 3);  // m v1, other, m v2: no load on demand meanwhile
}

TEST(MemoryBudgetTest, EvictsIdleUnpinnedModelsOldestFirstUntilTheLoadFits) {
  std::vector<ResidentModel> r = {
      {"old", 1, 40, 1, false, true, true},   {"pinned", 1, 40, 0, true, true, true},
      {"busy", 1, 40, 2, false, false, true}, {"newer", 1, 40, 3, false, true, true},
      {"newest", 1, 40, 4, false, true, true},
  };
  EvictionPlan plan = PlanLoad({200, 0}, r, "x", 70, true);
  ASSERT_TRUE(plan.refusal.ok()) << plan.refusal.ToString();
  ASSERT_EQ(plan.victims.size(), 2u);
  EXPECT_EQ(plan.victims[0].name, "old");
  EXPECT_EQ(plan.victims[1].name, "newer");
  EXPECT_TRUE(PlanLoad({200, 0}, r, "x", 70, false).victims.empty());
  EXPECT_EQ(PlanLoad({200, 0}, r, "x", 70, false).refusal.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(PlanLoad({200, 0}, r, "x", 200, true).refusal.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(PlanLoad({200, 0}, r, "x", 200, true).victims.empty());  // all or nothing
  EXPECT_TRUE(PlanLoad({}, r, "x", 1 << 30, true).refusal.ok());
}

int64_t Bytes(const std::string& text) {
  auto parsed = ParseBytes(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : -1;
}

TEST(MemoryBudgetTest, ParsesSizes) {
  EXPECT_EQ(Bytes("512"), 512);
  EXPECT_EQ(Bytes("2K"), 2048);
  EXPECT_EQ(Bytes("160MiB"), int64_t{160} << 20);
  EXPECT_EQ(Bytes("1.5G"), int64_t{3} << 29);
  EXPECT_EQ(Bytes("2gb"), int64_t{2} << 30);
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("lots").ok());
  EXPECT_FALSE(ParseBytes("5X").ok());
  EXPECT_FALSE(ParseBytes("-1G").ok());
  EXPECT_EQ(FormatBytes(8 << 20), "8.0 MiB");
}

}  // namespace
}  // namespace manypy
