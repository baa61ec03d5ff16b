// The ModelManager with fake models (no Python, no sockets): loads at start, broken archives
// and failed loads in the index, reloads and unloads that fail no request and unload a
// version on the manager's thread once drained, per-model settings, warm-up.
#include "server/lifecycle/model_manager.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "tests/package_format/test_zip.h"
#include "tests/test_util/fake_executable.h"
#include "tests/test_util/fake_loader.h"
#include "tests/test_util/gate.h"
#include "tests/test_util/request_builder.h"
#include "tests/test_util/test_archives.h"

namespace manypy {
namespace {

using namespace std::chrono_literals;
using testing::Answers;
using testing::FakeExecutable;
using testing::FakeLoader;
using testing::Gate;
using testing::MakeRequest;
using testing::TestManifest;

constexpr size_t kSlots = 2;

/// What a test learns about one GatedExecutable, also once it is gone.
struct Trace {
  std::mutex mu;
  std::set<std::thread::id> ran_on;  // guarded by mu: threads that called Run
  std::thread::id unloaded_on;       // guarded by mu: the thread that destroyed it
  int answered_at_unload = -1;       // guarded by mu: answers->Get().size() then
  std::shared_ptr<Answers> answers;  // constant: the requests to count, if any

  /// The destructor has finished (a weak_ptr expires before it starts).
  bool unloaded() {
    std::lock_guard<std::mutex> lock(mu);
    return unloaded_on != std::thread::id();
  }
};

/// Returns inputs x factor once its gate is open; records into `trace`.
class GatedExecutable final : public Executable {
 public:
  GatedExecutable(std::shared_ptr<Gate> gate, double factor, std::shared_ptr<Trace> trace)
      : gate_(std::move(gate)), factor_(factor), trace_(std::move(trace)) {}
  ~GatedExecutable() override {
    int answered = trace_->answers ? static_cast<int>(trace_->answers->Get().size()) : -1;
    std::lock_guard<std::mutex> lock(trace_->mu);
    trace_->unloaded_on = std::this_thread::get_id();
    trace_->answered_at_unload = answered;
  }
  StatusOr<std::vector<Value>> Run(size_t, const std::vector<Value>& inputs,
                                   InterruptHook*) override {
    {
      std::lock_guard<std::mutex> lock(trace_->mu);
      trace_->ran_on.insert(std::this_thread::get_id());
    }
    ++waiting_;
    gate_->Pass();
    --waiting_;
    std::vector<Value> out;
    for (const auto& v : inputs) out.emplace_back(v.to_tensor() * factor_);
    return out;
  }
  std::atomic<int> waiting_{0};

 private:
  const std::shared_ptr<Gate> gate_;
  const double factor_;
  const std::shared_ptr<Trace> trace_;
};

/// The version was unloaded off the request path: not by the test's thread
/// (which dropped the last handle) nor by a dispatcher worker that ran it.
void ExpectUnloadedOnTheManagersThread(Trace& trace) {
  std::lock_guard<std::mutex> lock(trace.mu);
  EXPECT_NE(trace.unloaded_on, std::thread::id());
  EXPECT_NE(trace.unloaded_on, std::this_thread::get_id());
  EXPECT_EQ(trace.ran_on.count(trace.unloaded_on), 0u) << "unloaded on an inference thread";
}

/// Fails every call whose inputs are all zeros, as the warm-up's are.
class RefusesZeros final : public Executable {
 public:
  StatusOr<std::vector<Value>> Run(size_t, const std::vector<Value>& inputs,
                                   InterruptHook*) override {
    bool zeros = true;
    for (const auto& v : inputs) zeros = zeros && v.to_tensor().eq(0).all().item<bool>();
    if (zeros) return Internal("ValueError: all-zero input");
    return inputs;
  }
};

/// What a SlotExecutable saw, per interpreter slot. Thread-safe.
class SlotLog {
 public:
  /// Prepare waits (at most 5 s) until this many slots are preparing at once.
  int wait_for_all_preparing = 0;

  void StartPreparing(size_t slot) {
    std::unique_lock<std::mutex> lock(mu_);
    prepared_.push_back(slot);
    prepare_threads_.push_back(ThisThread());
    max_preparing_ = std::max(max_preparing_, ++preparing_);
    cv_.notify_all();
    cv_.wait_for(lock, 5s, [&] { return preparing_ >= wait_for_all_preparing; });
  }
  void EndPreparing() {
    std::lock_guard<std::mutex> lock(mu_);
    --preparing_;
  }
  void RecordRun(size_t slot) {
    std::lock_guard<std::mutex> lock(mu_);
    ran_.push_back(slot);
  }
  void RecordRelease(size_t slot) {
    std::lock_guard<std::mutex> lock(mu_);
    released_.push_back(slot);
    release_threads_.push_back(ThisThread());
  }

  /// The thread that ran a Prepare or Release, and its nice value then.
  struct ThreadSeen {
    std::thread::id id;
    int nice;
  };
  static ThreadSeen ThisThread() {
    return {std::this_thread::get_id(),
            getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)))};
  }
  std::vector<ThreadSeen> PrepareThreads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prepare_threads_;
  }
  std::vector<ThreadSeen> ReleaseThreads() const {
    std::lock_guard<std::mutex> lock(mu_);
    return release_threads_;
  }

  /// Slots prepared, in order (sorted: at start the order is not defined).
  std::vector<size_t> Prepared() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<size_t> out = prepared_;
    std::sort(out.begin(), out.end());
    return out;
  }
  /// The slot prepared first.
  size_t FirstPrepared() const {
    std::lock_guard<std::mutex> lock(mu_);
    return prepared_.empty() ? SIZE_MAX : prepared_.front();
  }
  std::vector<size_t> Ran() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ran_;
  }
  std::vector<size_t> Released() const {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }
  int preparing() const {
    std::lock_guard<std::mutex> lock(mu_);
    return preparing_;
  }
  int max_preparing() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_preparing_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> prepared_, ran_, released_;  // guarded by mu_
  std::vector<ThreadSeen> prepare_threads_, release_threads_;  // guarded by mu_
  int preparing_ = 0;                              // guarded by mu_
  int max_preparing_ = 0;                          // guarded by mu_
};

/// Returns inputs x factor; Prepare passes `prepare_gate`; logs every slot.
class SlotExecutable final : public Executable {
 public:
  SlotExecutable(std::shared_ptr<Gate> prepare_gate, double factor, std::shared_ptr<SlotLog> log)
      : prepare_gate_(std::move(prepare_gate)), factor_(factor), log_(std::move(log)) {}
  Status Prepare(size_t slot) override {
    log_->StartPreparing(slot);
    prepare_gate_->Pass();
    log_->EndPreparing();
    return Status::Ok();
  }
  void Release(size_t slot) override { log_->RecordRelease(slot); }
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook*) override {
    log_->RecordRun(slot);
    std::vector<Value> out;
    for (const auto& v : inputs) out.emplace_back(v.to_tensor() * factor_);
    return out;
  }

 private:
  const std::shared_ptr<Gate> prepare_gate_;
  const double factor_;
  const std::shared_ptr<SlotLog> log_;
};

/// This process's nice value (its main thread's).
int ProcessNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(getpid())); }

template <typename Predicate>
bool WaitFor(Predicate done, std::chrono::milliseconds timeout = 10s) {
  for (auto until = Clock::now() + timeout; Clock::now() < until;
       std::this_thread::sleep_for(2ms)) {
    if (done()) return true;
  }
  return done();
}

class ModelManagerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (auto& gate : gates_) gate->Open();  // no call stays stuck if a test failed
  }

  /// Writes a minimal valid archive (manifest + entry-point pickle) for `m`.
  std::string WriteArchive(const std::string& file, const Manifest& m) {
    return testing::WriteTestArchive(dir_, file, m);
  }

  /// Starts the manager on the temp repository with the fake loader.
  bool Start(ModelManager::Options options = {}, size_t slots = kSlots) {
    dispatcher_ = std::make_unique<Dispatcher>(Dispatcher::Options{slots});
    options.repository = dir_.path();
    options.loader = loader_.AsLoader();
    options.interpreters = slots;
    auto created = ModelManager::Create(nullptr, dispatcher_.get(), std::move(options));
    if (!created.ok()) ADD_FAILURE() << created.status().ToString();
    if (created.ok()) manager_ = std::move(*created);
    return manager_ != nullptr;
  }

  /// A handle on the serving version (or `version`); null, failing the test, if none.
  std::shared_ptr<Model> Serving(const std::string& name, const std::string& version = "") {
    auto got = manager_->Get(name, version);
    if (!got.ok()) ADD_FAILURE() << got.status().ToString();
    return got.ok() ? *got : nullptr;
  }

  std::shared_ptr<Gate> NewGate() {
    gates_.push_back(std::make_shared<Gate>());
    return gates_.back();
  }

  ModelStatus IndexEntry(const std::string& name, int64_t version) {
    for (const auto& s : manager_->Index()) {
      if (s.name == name && s.version == version) return s;
    }
    ADD_FAILURE() << "no index entry for " << name << " version " << version;
    return {};
  }

  /// Infers one request with value `value` through `model` and returns its first output value.
  static float InferOne(const Model& model, float value) {
    auto answers = std::make_shared<Answers>();
    EXPECT_EQ(model.Infer(MakeRequest(answers, value)), nullptr);
    EXPECT_TRUE(answers->Wait(1));
    auto got = answers->Get();
    if (got.empty() || !got[0].status.ok()) {
      ADD_FAILURE() << (got.empty() ? "no answer" : got[0].status.ToString());
      return -1;
    }
    return got[0].outputs[0].to_tensor()[0][0].item<float>();
  }

  testing::TempDir dir_;
  FakeLoader loader_;
  std::vector<std::shared_ptr<Gate>> gates_;
  // Destroyed in reverse order: the manager before the dispatcher it uses.
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<ModelManager> manager_;
};

TEST_F(ModelManagerTest, LoadsTheNewestVersionOfEveryModelAtStartAndServesIt) {
  const std::string alpha = WriteArchive("alpha.mpk", TestManifest("alpha", 1));
  WriteArchive("beta_1.mpk", TestManifest("beta", 1));
  WriteArchive("beta_2.mpk", TestManifest("beta", 2));
  ASSERT_TRUE(Start());

  EXPECT_EQ(IndexEntry("alpha", 1).state, ModelState::kReady);
  EXPECT_EQ(IndexEntry("beta", 2).state, ModelState::kReady);
  EXPECT_EQ(IndexEntry("beta", 1).state, ModelState::kUnavailable);  // listed, not served
  EXPECT_EQ(manager_->ReadyModels().size(), 2u);
  EXPECT_EQ(loader_.loads(), 2);

  std::shared_ptr<Model> a = Serving("alpha");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->version(), 1);
  EXPECT_EQ(a->path(), alpha);
  EXPECT_EQ(InferOne(*a, 3), 30);  // computed by the fake of version 1: x10
  auto fake = std::dynamic_pointer_cast<FakeExecutable>(loader_.Made("alpha", 1).lock());
  ASSERT_NE(fake, nullptr);
  EXPECT_EQ(fake->calls_.load(), static_cast<int>(kSlots) + 1);  // one warm-up per slot + ours

  std::shared_ptr<Model> b = Serving("beta", "-1");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->version(), 2);
  EXPECT_EQ(InferOne(*b, 3), 60);
  EXPECT_TRUE(manager_->Get("beta", "2").ok());
  EXPECT_EQ(manager_->Get("beta", "1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->Get("gamma", "").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, AQuarantinedModelIsRefusedWithItsReasonUntilAnExplicitLoadLiftsIt) {
  WriteArchive("crashy.mpk", TestManifest("crashy", 1));
  WriteArchive("calm.mpk", TestManifest("calm", 1));
  testing::TempDir state;
  {
    std::ofstream crashes(state.path() + "/crashes");
    crashes << "1000\tSIGSEGV\tcrashy\t1\n1300\tSIGABRT\tcrashy\t1\n";
  }
  auto quarantine = Quarantine::Open({state.path()}, 1400);
  ASSERT_TRUE(quarantine.ok()) << quarantine.status().ToString();
  ModelManager::Options options;
  options.quarantine = quarantine->get();
  ASSERT_TRUE(Start(options));
  EXPECT_EQ(IndexEntry("calm", 1).state, ModelState::kReady);
  ModelStatus refused = IndexEntry("crashy", 1);
  EXPECT_EQ(refused.state, ModelState::kUnavailable);
  EXPECT_NE(refused.reason.find("quarantined: crashed the server 2 times, last SIGABRT in version 1"),
            std::string::npos) << refused.reason;
  EXPECT_EQ(loader_.loads(), 1);  // never handed to the loader
  auto got = manager_->Get("crashy", "");
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("quarantined"), std::string::npos) << got.status().ToString();

  ASSERT_TRUE(manager_->Load("crashy").ok());  // an operator's explicit load lifts it
  EXPECT_EQ(IndexEntry("crashy", 1).state, ModelState::kReady);
  EXPECT_TRUE((*quarantine)->Admit("crashy", 1).ok());
  EXPECT_TRUE((*quarantine)->Reasons().empty());
}

TEST_F(ModelManagerTest, ExplicitModeLoadsOnlyTheStartupModelsUntilAsked) {
  WriteArchive("a.mpk", TestManifest("a", 1));
  WriteArchive("b.mpk", TestManifest("b", 1));
  ModelManager::Options options;
  options.explicit_control = true;
  options.startup_models = {"b"};
  ASSERT_TRUE(Start(options));
  EXPECT_EQ(IndexEntry("b", 1).state, ModelState::kReady);
  EXPECT_EQ(IndexEntry("a", 1).state, ModelState::kUnavailable);
  EXPECT_EQ(manager_->Get("a", "").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(manager_->Load("a").ok());
  EXPECT_EQ(IndexEntry("a", 1).state, ModelState::kReady);
  EXPECT_EQ(manager_->Load("zeta").code(), StatusCode::kNotFound);
  EXPECT_EQ(manager_->Get("zeta", "").status().code(), StatusCode::kNotFound);
}

TEST_F(ModelManagerTest, BrokenArchiveIsListedUnavailableWithItsReason) {
  WriteArchive("good.mpk", TestManifest("good", 1));
  const std::string broken = dir_.File("broken.mpk");
  testing::WriteFile(broken, "this is not a zip file");
  ASSERT_TRUE(Start());

  ModelStatus s = IndexEntry("broken", 0);
  EXPECT_EQ(s.state, ModelState::kUnavailable);
  EXPECT_NE(s.reason.find(broken), std::string::npos) << s.reason;  // names the archive
  EXPECT_EQ(IndexEntry("good", 1).state, ModelState::kReady);       // the others still load
  // Never loaded, so unknown to the manager (the index gives the reason).
  EXPECT_EQ(manager_->Get("broken", "").status().code(), StatusCode::kNotFound);
  Status load = manager_->Load("broken");
  EXPECT_EQ(load.code(), StatusCode::kInvalidArgument) << load.ToString();
  EXPECT_NE(load.message().find(broken), std::string::npos) << load.message();
}

TEST_F(ModelManagerTest, LoaderErrorIsShownInTheIndexAndByGet) {
  loader_.set_make([](const Manifest& m) -> StatusOr<std::shared_ptr<Executable>> {
    if (m.device.rfind("cuda", 0) == 0) {
      return FailedPrecondition("model '" + m.name + "' needs device " + m.device +
                                " but this server's libtorch has no CUDA");
    }
    return FakeLoader::MakeFake(m);
  });
  Manifest gpu = TestManifest("gpu", 3);
  gpu.device = "cuda";
  WriteArchive("gpu.mpk", gpu);
  WriteArchive("cpu.mpk", TestManifest("cpu", 1));
  ASSERT_TRUE(Start());

  ModelStatus s = IndexEntry("gpu", 3);
  EXPECT_EQ(s.state, ModelState::kUnavailable);
  EXPECT_NE(s.reason.find("no CUDA"), std::string::npos) << s.reason;
  EXPECT_EQ(IndexEntry("cpu", 1).state, ModelState::kReady);
  auto got = manager_->Get("gpu", "");
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("no CUDA"), std::string::npos) << got.status().message();
  EXPECT_EQ(manager_->Load("gpu").code(), StatusCode::kFailedPrecondition);
}

TEST_F(ModelManagerTest, ReloadWhileRequestsAreInFlightFailsNoneAndUnloadsTheOldOneWhenDrained) {
  auto gate1 = NewGate();
  auto prepare_gate2 = NewGate();
  auto answers1 = std::make_shared<Answers>();
  auto trace1 = std::make_shared<Trace>();
  trace1->answers = answers1;
  auto slots2 = std::make_shared<SlotLog>();
  loader_.set_make([=](const Manifest& m) -> StatusOr<std::shared_ptr<Executable>> {
    if (m.version != 1) {
      return std::shared_ptr<Executable>(std::make_shared<SlotExecutable>(prepare_gate2, 20, slots2));
    }
    return std::shared_ptr<Executable>(std::make_shared<GatedExecutable>(gate1, 10, trace1));
  });
  WriteArchive("m_1.mpk", TestManifest("m", 1));
  ModelManager::Options options;
  options.serving.overrides["m"] = {{"instance_count", "1"}};  // so that requests queue
  ASSERT_TRUE(Start(options));
  std::shared_ptr<Model> v1 = Serving("m");
  ASSERT_NE(v1, nullptr);
  std::weak_ptr<Executable> exe1 = loader_.Made("m", 1);
  auto* gated = dynamic_cast<GatedExecutable*>(exe1.lock().get());
  ASSERT_NE(gated, nullptr);

  // The reload loads interpreter 0 (held), while version 1 takes requests:
  // one runs on interpreter 1, five queue behind it.
  WriteArchive("m_2.mpk", TestManifest("m", 2));
  prepare_gate2->Close();
  Status reloaded = Internal("not done");
  std::thread reload([&] { reloaded = manager_->Load("m"); });
  ASSERT_TRUE(WaitFor([&] { return slots2->preparing() == 1; }));
  // The index shows both: the new version LOADING while the old one serves.
  EXPECT_EQ(IndexEntry("m", 2).state, ModelState::kLoading);
  EXPECT_EQ(IndexEntry("m", 1).state, ModelState::kReady);
  gate1->Close();
  for (int i = 1; i <= 6; ++i) EXPECT_EQ(v1->Infer(MakeRequest(answers1, static_cast<float>(i))), nullptr);
  ASSERT_TRUE(WaitFor([&] { return gated->waiting_ == 1; }));
  // Interpreter 1 is next: the reload waits for the call running there, which
  // the gate lets finish; the next one starts on interpreter 0 and waits.
  prepare_gate2->Open();
  ASSERT_TRUE(WaitFor([&] { return dispatcher_->TEST_SlotHeld(1); }));
  gate1->Permit(1);
  reload.join();
  ASSERT_TRUE(reloaded.ok()) << reloaded.ToString();

  std::shared_ptr<Model> v2 = Serving("m");
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->version(), 2);
  EXPECT_EQ(IndexEntry("m", 2).state, ModelState::kReady);
  EXPECT_EQ(IndexEntry("m", 1).state, ModelState::kUnloading);  // draining its queue
  EXPECT_EQ(manager_->Get("m", "1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(InferOne(*v2, 1), 20);      // new requests go to version 2 at once
  EXPECT_EQ(v1->Infer(MakeRequest(answers1, 7)), nullptr);  // a handle taken before the swap still works
  v1.reset();
  v2.reset();

  std::this_thread::sleep_for(200ms);  // long enough for a wrong early unload to show
  EXPECT_FALSE(exe1.expired()) << "version 1 was unloaded with requests still queued";
  EXPECT_EQ(answers1->Get().size(), 1u);

  gate1->Open();
  ASSERT_TRUE(answers1->Wait(7));
  for (const auto& a : answers1->Get()) {
    ASSERT_TRUE(a.status.ok()) << a.status.ToString();
    float in = a.outputs[0].to_tensor()[0][0].item<float>() / 10;  // computed by version 1
    EXPECT_TRUE(in >= 1 && in <= 7 && in == static_cast<int>(in)) << in;
  }
  ASSERT_TRUE(WaitFor([&] { return trace1->unloaded(); })) << "version 1 was never unloaded";
  EXPECT_TRUE(exe1.expired());
  {
    std::lock_guard<std::mutex> lock(trace1->mu);
    EXPECT_EQ(trace1->answered_at_unload, 7);  // unloaded after its last request was answered
  }
  ExpectUnloadedOnTheManagersThread(*trace1);
  EXPECT_FALSE(loader_.Made("m", 2).expired());
}

TEST_F(ModelManagerTest, ReloadLoadsOneInterpreterAtATimeWhileTheOthersServe) {
  auto prepare_gate = NewGate();
  auto slots1 = std::make_shared<SlotLog>();
  auto slots2 = std::make_shared<SlotLog>();
  loader_.set_make([=](const Manifest& m) -> StatusOr<std::shared_ptr<Executable>> {
    auto log = m.version == 1 ? slots1 : slots2;
    return std::shared_ptr<Executable>(std::make_shared<SlotExecutable>(
        m.version == 1 ? NewGate() : prepare_gate, 10.0 * static_cast<double>(m.version), log));
  });
  WriteArchive("m_1.mpk", TestManifest("m", 1));
  ASSERT_TRUE(Start());
  EXPECT_EQ(slots1->Prepared(), (std::vector<size_t>{0, 1}));
  std::shared_ptr<Model> v1 = Serving("m");
  ASSERT_NE(v1, nullptr);

  WriteArchive("m_2.mpk", TestManifest("m", 2));
  prepare_gate->Close();
  Status reloaded = Internal("not done");
  std::thread::id caller;
  std::thread reload([&] {
    caller = std::this_thread::get_id();
    reloaded = manager_->Load("m");
  });
  ASSERT_TRUE(WaitFor([&] { return slots2->preparing() == 1; }));
  // Version 2 loads on one interpreter; the other answers version 1's requests.
  size_t warmups = slots1->Ran().size();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(InferOne(*v1, 1), 10);
  size_t loading = slots2->FirstPrepared();
  std::vector<size_t> ran = slots1->Ran();
  ASSERT_EQ(ran.size(), warmups + 5);
  for (size_t i = warmups; i < ran.size(); ++i) {
    EXPECT_NE(ran[i], loading) << "version 1 ran on the interpreter version 2 was loading into";
  }
  prepare_gate->Open();
  reload.join();
  ASSERT_TRUE(reloaded.ok()) << reloaded.ToString();
  EXPECT_EQ(slots2->Prepared(), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(slots2->max_preparing(), 1) << "a reload loaded several interpreters at once";
  EXPECT_EQ(InferOne(*Serving("m"), 1), 20);
  v1.reset();
  // Version 1 is released one interpreter at a time, then destroyed.
  ASSERT_TRUE(WaitFor([&] { return slots1->Released().size() == 2; }));
  EXPECT_EQ(slots1->Released(), (std::vector<size_t>{0, 1}));

  // Both loads and unloads ran in the background: at nice +10 (capped at 19),
  // each on one long-lived thread, never on the caller's.
  const int background = std::min(ProcessNice() + kBackgroundNiceIncrement, 19);
  std::vector<SlotLog::ThreadSeen> prepares = slots2->PrepareThreads();
  ASSERT_EQ(prepares.size(), 2u);
  for (const auto& seen : prepares) {
    EXPECT_EQ(seen.nice, background);
    EXPECT_EQ(seen.id, prepares[0].id) << "each load on a thread of its own";
    EXPECT_NE(seen.id, caller);
  }
  for (const auto& seen : slots1->ReleaseThreads()) EXPECT_EQ(seen.nice, background);
}

TEST_F(ModelManagerTest, AtStartEveryInterpreterLoadsAtOnce) {
  auto slots = std::make_shared<SlotLog>();
  slots->wait_for_all_preparing = kSlots;
  loader_.set_make([=](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    return std::shared_ptr<Executable>(std::make_shared<SlotExecutable>(NewGate(), 10, slots));
  });
  WriteArchive("m_1.mpk", TestManifest("m", 1));
  ASSERT_TRUE(Start());
  EXPECT_EQ(slots->max_preparing(), static_cast<int>(kSlots));
  EXPECT_EQ(IndexEntry("m", 1).state, ModelState::kReady);
  // Nothing serves yet: no reason to load at a lower priority.
  for (const auto& seen : slots->PrepareThreads()) EXPECT_EQ(seen.nice, ProcessNice());
}

TEST_F(ModelManagerTest, StatisticsSurviveReloadsPerVersion) {
  WriteArchive("m_1.mpk", TestManifest("m", 1));
  ASSERT_TRUE(Start());
  std::shared_ptr<Model> v1 = Serving("m");
  ASSERT_NE(v1, nullptr);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(InferOne(*v1, 1), 10);
  EXPECT_EQ(v1->stats().success_count.load(), 3u);
  v1.reset();

  ASSERT_TRUE(manager_->Load("m").ok());  // the same version again: its counts continue
  std::shared_ptr<Model> again = Serving("m");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->stats().success_count.load(), 3u);
  EXPECT_EQ(InferOne(*again, 1), 10);
  EXPECT_EQ(again->stats().success_count.load(), 4u);
  EXPECT_EQ(again->stats().execution_count.load(), 4u);
  again.reset();

  WriteArchive("m_2.mpk", TestManifest("m", 2));  // a new version starts at zero
  ASSERT_TRUE(manager_->Load("m").ok());
  std::shared_ptr<Model> v2 = Serving("m");
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->version(), 2);
  EXPECT_EQ(v2->stats().success_count.load(), 0u);
}

TEST_F(ModelManagerTest, UnloadRefusesNewHandlesAndAnswersInFlightRequests) {
  auto gate = NewGate();
  auto trace = std::make_shared<Trace>();
  loader_.set_make([gate, trace](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    return std::shared_ptr<Executable>(std::make_shared<GatedExecutable>(gate, 10, trace));
  });
  WriteArchive("m.mpk", TestManifest("m", 1));
  ASSERT_TRUE(Start());
  gate->Close();
  std::shared_ptr<Model> handle = Serving("m");
  ASSERT_NE(handle, nullptr);
  std::weak_ptr<Executable> exe = loader_.Made("m", 1);
  auto* gated = dynamic_cast<GatedExecutable*>(exe.lock().get());
  ASSERT_NE(gated, nullptr);
  auto answers = std::make_shared<Answers>();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(handle->Infer(MakeRequest(answers, 1)), nullptr);
  ASSERT_TRUE(WaitFor([&] { return gated->waiting_ == static_cast<int>(kSlots); }));

  ASSERT_TRUE(manager_->Unload("m").ok());
  auto refused = manager_->Get("m", "");
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("unloaded"), std::string::npos)
      << refused.status().message();
  ModelStatus s = IndexEntry("m", 1);
  EXPECT_EQ(s.state, ModelState::kUnavailable);
  EXPECT_EQ(s.reason, "unloaded");
  EXPECT_EQ(manager_->Unload("m").code(), StatusCode::kNotFound);
  EXPECT_EQ(handle->Infer(MakeRequest(answers, 1)), nullptr);  // a handle taken before still works
  handle.reset();

  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(exe.expired());
  EXPECT_TRUE(answers->Get().empty());
  gate->Open();
  ASSERT_TRUE(answers->Wait(4));
  for (const auto& a : answers->Get()) EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  ASSERT_TRUE(WaitFor([&] { return trace->unloaded(); })) << "never unloaded";
  EXPECT_TRUE(exe.expired());
  ExpectUnloadedOnTheManagersThread(*trace);

  ASSERT_TRUE(manager_->Load("m").ok());  // and it can come back
  EXPECT_EQ(IndexEntry("m", 1).state, ModelState::kReady);
}

TEST_F(ModelManagerTest, FailedReloadKeepsServingTheCurrentVersion) {
  WriteArchive("m_1.mpk", TestManifest("m", 1));
  ASSERT_TRUE(Start());
  loader_.set_make([](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    return Internal("RuntimeError: out of memory");
  });
  WriteArchive("m_2.mpk", TestManifest("m", 2));
  Status reload = manager_->Load("m");
  EXPECT_EQ(reload.code(), StatusCode::kInternal);
  std::shared_ptr<Model> handle = Serving("m");
  ASSERT_NE(handle, nullptr);
  EXPECT_EQ(handle->version(), 1);
  EXPECT_EQ(InferOne(*handle, 1), 10);
  EXPECT_EQ(IndexEntry("m", 1).state, ModelState::kReady);
  EXPECT_EQ(IndexEntry("m", 2).state, ModelState::kUnavailable);
  EXPECT_NE(IndexEntry("m", 2).reason.find("out of memory"), std::string::npos)
      << IndexEntry("m", 2).reason;
  EXPECT_FALSE(loader_.Made("m", 1).expired());
}

TEST_F(ModelManagerTest, PerModelOverridesReachTheModelsSettings) {
  WriteArchive("tuned.mpk", TestManifest("tuned", 1));
  WriteArchive("plain.mpk", TestManifest("plain", 1));
  Manifest flat = TestManifest("flat", 1);
  flat.max_batch_size = 0;
  WriteArchive("flat.mpk", flat);
  ModelManager::Options options;
  options.serving.overrides["tuned"] = {{"instance_count", "2"},
                                        {"dynamic_batching", "true"},
                                        {"max_queue_delay_microseconds", "700"},
                                        {"max_queue_size", "5"}};
  options.serving.overrides["flat"] = {{"dynamic_batching", "true"}};
  ASSERT_TRUE(Start(options, /*slots=*/4));

  std::shared_ptr<Model> tuned = Serving("tuned");
  ASSERT_NE(tuned, nullptr);
  const ModelSettings& t = tuned->settings();
  EXPECT_EQ(t.instance_count, 2u);
  EXPECT_TRUE(t.batching.dynamic);
  EXPECT_EQ(t.batching.max_queue_delay_microseconds, 700);
  EXPECT_EQ(t.max_queue_size, 5u);
  EXPECT_EQ(tuned->queue()->limits().instance_count, 2u);  // what the dispatcher enforces

  std::shared_ptr<Model> plain = Serving("plain");
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->settings().instance_count, 4u);  // manifest 0: one per interpreter
  EXPECT_FALSE(plain->settings().batching.dynamic);
  EXPECT_EQ(plain->settings().max_queue_size, 256u);

  // An override that does not fit the model fails its load, naming why.
  ModelStatus s = IndexEntry("flat", 1);
  EXPECT_EQ(s.state, ModelState::kUnavailable);
  EXPECT_NE(s.reason.find("dynamic batching"), std::string::npos) << s.reason;
}

TEST_F(ModelManagerTest, WarmUpFailureFailsTheLoadWithAReasonNamingTheWarmUp) {
  loader_.set_make([](const Manifest&) -> StatusOr<std::shared_ptr<Executable>> {
    return std::shared_ptr<Executable>(std::make_shared<RefusesZeros>());
  });
  WriteArchive("picky.mpk", TestManifest("picky", 1));
  WriteArchive("unwarmed.mpk", TestManifest("unwarmed", 1));
  ModelManager::Options options;
  options.serving.overrides["unwarmed"] = {{"warmup_runs", "0"}};
  ASSERT_TRUE(Start(options));

  ModelStatus s = IndexEntry("picky", 1);
  EXPECT_EQ(s.state, ModelState::kUnavailable);
  EXPECT_NE(s.reason.find("warm-up of model 'picky'"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("all-zero input"), std::string::npos) << s.reason;
  EXPECT_EQ(manager_->Get("picky", "").status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(loader_.Made("picky", 1).expired());  // nothing of the failed load is kept

  std::shared_ptr<Model> unwarmed = Serving("unwarmed");  // no warm-up, no failure
  ASSERT_NE(unwarmed, nullptr);
  EXPECT_EQ(InferOne(*unwarmed, 2), 2);
}

TEST_F(ModelManagerTest, CreateRefusesAMissingRepositoryAndAMissingLoader) {
  Dispatcher dispatcher({1});
  ModelManager::Options options;
  options.repository = dir_.File("missing");
  options.loader = loader_.AsLoader();
  EXPECT_EQ(ModelManager::Create(nullptr, &dispatcher, options).status().code(),
            StatusCode::kNotFound);
  options.repository = dir_.path();
  options.loader = nullptr;
  EXPECT_EQ(ModelManager::Create(nullptr, &dispatcher, options).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manypy
