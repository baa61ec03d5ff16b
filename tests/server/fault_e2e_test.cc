// FaultTest: fault injection against the real manypy-server process, over gRPC
// and HTTP. Each test injects one fault (a model that raises, hangs, returns
// the wrong thing, exits, fails to load; a client that leaves; load/unload
// storms; an archive replaced on disk) and then checks the exact status and
// message, that every request sent meanwhile got an answer (counted), and that
// the same and another model serve normally afterwards.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::string JsonInfer(const std::vector<float>& values, const std::string& input = "INPUT__0",
                      const std::string& datatype = "FP32") {
  std::ostringstream body;
  body << R"({"inputs":[{"name":")" << input << R"(","datatype":")" << datatype << R"(","shape":[)"
       << values.size() << R"(],"data":[)";
  for (size_t i = 0; i < values.size(); ++i) body << (i ? "," : "") << values[i];
  body << "]}]}";
  return body.str();
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// Counts answers by kind from many client threads; every request sent must be
/// counted exactly once, and only the kinds a test allows may appear.
class Tally {
 public:
  void Count(const std::string& kind) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_[kind];
  }
  int Total() {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const auto& [kind, count] : counts_) n += count;
    return n;
  }
  std::map<std::string, int> counts() {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_;
  }
  std::string ToString() {
    std::ostringstream out;
    for (const auto& [kind, count] : counts()) out << kind << "=" << count << " ";
    return out.str();
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> counts_;
};

void RunConcurrently(int threads, const std::function<void(int)>& client) {
  std::vector<std::thread> all;
  for (int i = 0; i < threads; ++i) all.emplace_back(client, i);
  for (auto& t : all) t.join();
}

class FaultTest : public ServerTest {
 protected:
  /// A repository of its own holding copies of `archives` (relative to the test repository).
  void MakeRepository(const std::vector<std::string>& archives) {
    repo_ = fs::temp_directory_path() /
            ("manypy_fault_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(repo_);
    fs::create_directories(repo_);
    for (const auto& a : archives) {
      fs::copy_file(fs::path(MANYPY_TEST_REPOSITORY) / a, repo_ / fs::path(a).filename());
    }
  }
  void Start(std::vector<std::string> args) {
    args.push_back("--model-repository=" + repo_.string());
    StartServer(std::move(args));
  }
  void TearDown() override {
    ServerTest::TearDown();
    if (!repo_.empty()) fs::remove_all(repo_);
  }

  testing::HttpReply Http(const std::string& method, const std::string& target,
                          const std::string& body = "") {
    testing::HttpConnection connection(server_.http_port());
    return connection.Send(method, target, body);
  }

  /// A normal request to `model` (a model that doubles a positive input) is
  /// answered correctly over gRPC and over HTTP.
  void ExpectServes(const std::string& model) {
    SCOPED_TRACE("after the fault, " + model + " serves");
    ModelInferResponse out;
    grpc::Status s = Infer(FloatRequest(model, {1.5f, 4.f}), &out);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{3.f, 8.f}));
    testing::HttpReply reply =
        Http("POST", "/v2/models/" + model + "/infer", JsonInfer({1.5f, 4.f}));
    EXPECT_EQ(reply.status, 200) << reply.body;
    EXPECT_TRUE(Contains(reply.body, "[3.0,8.0]")) << reply.body;
  }

  /// The value of `metric` for `model` on /metrics (summed over versions; 0 if absent).
  double Metric(const std::string& metric, const std::string& model) {
    testing::HttpConnection connection(server_.metrics_port());
    std::istringstream lines(connection.Send("GET", "/metrics").body);
    double sum = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(metric + "{", 0) == 0 && Contains(line, "model=\"" + model + "\"")) {
        sum += std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return sum;
  }
  /// Waits (up to 20 s) until `metric` for `model` reads `value`.
  bool WaitForMetric(const std::string& metric, const std::string& model, double value) {
    for (auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
      if (Metric(metric, model) == value) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  /// POSTs `body` to `model` over a connection of its own, waits until `metric`
  /// (queued requests or executions in flight) shows it, then closes the
  /// connection: a client that leaves.
  void HttpInferThenLeave(const std::string& model, const std::string& body,
                          const std::string& metric) {
    testing::HttpConnection connection(server_.http_port());
    connection.WriteRaw("POST /v2/models/" + model +
                        "/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_TRUE(WaitForMetric(metric, model, 1)) << model;
  }

  /// As Metric, only lines that also contain `label` (e.g. outcome="cancelled").
  double MetricWith(const std::string& metric, const std::string& model, const std::string& label) {
    testing::HttpConnection connection(server_.metrics_port());
    std::istringstream lines(connection.Send("GET", "/metrics").body);
    double sum = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(metric + "{", 0) == 0 && Contains(line, "model=\"" + model + "\"") &&
          Contains(line, label)) {
        sum += std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return sum;
  }
  static std::string ReadLog(const std::string& path) {
    std::ifstream in(path);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }

  void ExpectIdle(const std::string& model) {
    EXPECT_TRUE(WaitForMetric("manypy_queued_requests", model, 0)) << model;
    EXPECT_TRUE(WaitForMetric("manypy_in_flight_executions", model, 0)) << model;
  }

  fs::path repo_;
};

TEST_F(FaultTest, ModelThatRaisesIsInternalNamingTheErrorAndEveryRequestIsAnswered) {
  MakeRepository({"failing.mpk", "spin.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=failing", "--load-model=spin"});
  Tally tally;
  RunConcurrently(8, [&](int client) {
    for (int i = 0; i < 6; ++i) {
      bool bad = (client + i) % 2 == 0;
      if (client < 6) {
        ModelInferResponse out;
        grpc::Status s = Infer(FloatRequest("failing", {1.f, bad ? -1.f : 2.f}), &out);
        if (bad && s.error_code() == grpc::StatusCode::INTERNAL &&
            Contains(s.error_message(),
                     "model 'failing' raised ValueError: negative input is not allowed")) {
          tally.Count("internal");
        } else if (!bad && s.ok() &&
                   FromRaw<float>(out.raw_output_contents(0)) == std::vector<float>{2, 4}) {
          tally.Count("ok");
        } else {
          tally.Count("unexpected " + std::to_string(s.error_code()) + ": " + s.error_message());
        }
      } else {
        testing::HttpReply r =
            Http("POST", "/v2/models/failing/infer", JsonInfer({1.f, bad ? -1.f : 2.f}));
        if (bad && r.status == 500 &&
            Contains(r.body, "ValueError: negative input is not allowed")) {
          tally.Count("internal");
        } else if (!bad && r.status == 200 && Contains(r.body, "[2.0,4.0]")) {
          tally.Count("ok");
        } else {
          tally.Count("unexpected HTTP " + std::to_string(r.status) + ": " + r.body);
        }
      }
    }
  });
  EXPECT_EQ(tally.counts(), (std::map<std::string, int>{{"internal", 24}, {"ok", 24}}))
      << tally.ToString();
  ExpectServes("failing");
  ExpectServes("spin");
  EXPECT_EQ(Statistics("failing").inference_stats().fail().count(), 24u);
}

TEST_F(FaultTest, HangingModelIsInterruptedByTheExecutionLimitWhileOthersAreAnswered) {
  MakeRepository({"spin.mpk", "failing.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=spin", "--load-model=failing",
         "--model-config=spin:max_execution_seconds=1"});
  Tally tally;
  RunConcurrently(6, [&](int client) {
    if (client == 0) {  // stuck in Python until the execution limit interrupts it
      ModelInferResponse out;
      grpc::Status s = Infer(FloatRequest("spin", {-1.f}), &out);
      bool named = Contains(s.error_message(), "execution limit of 1 s") &&
                   Contains(s.error_message(), "'spin'");
      tally.Count(s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED && named
                      ? "interrupted"
                      : "unexpected " + s.error_message());
    } else if (client == 1) {
      testing::HttpReply r = Http("POST", "/v2/models/spin/infer", JsonInfer({-1.f}));
      tally.Count(r.status == 504 && Contains(r.body, "execution limit of 1 s")
                      ? "interrupted"
                      : "unexpected HTTP " + r.body);
    } else {
      for (int i = 0; i < 5; ++i) {
        ModelInferResponse out;
        grpc::Status s = Infer(FloatRequest(client % 2 ? "spin" : "failing", {2.f}), &out);
        tally.Count(s.ok() && FromRaw<float>(out.raw_output_contents(0))[0] == 4.f
                        ? "ok"
                        : "unexpected " + s.error_message());
      }
    }
  });
  EXPECT_EQ(tally.counts(), (std::map<std::string, int>{{"interrupted", 2}, {"ok", 20}}))
      << tally.ToString();
  ExpectServes("spin");
  ExpectServes("failing");
  ExpectIdle("spin");
}

TEST_F(FaultTest, WrongOutputTypeShapeOrDatatypeIsInternalNamingTheOutput) {
  MakeRepository({"faults/wrong_output.mpk", "failing.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=wrong_output", "--load-model=failing"});
  // The first element picks the fault (fault_models.WrongOutput); 5 is the right answer.
  const std::map<int, std::string> expected_words = {
      {1, "OUTPUT__0"}, {2, "OUTPUT__0"}, {3, "OUTPUT__0"}, {4, "no output(s) ['OUTPUT__0']"}};
  for (const auto& [mode, words] : expected_words) {
    ModelInferResponse out;
    grpc::Status s = Infer(FloatRequest("wrong_output", {static_cast<float>(mode), 1.f}), &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL)
        << "mode " << mode << ": " << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), words)) << "mode " << mode << ": " << s.error_message();
    EXPECT_TRUE(Contains(s.error_message(), "wrong_output"))
        << "mode " << mode << ": " << s.error_message();
    testing::HttpReply r =
        Http("POST", "/v2/models/wrong_output/infer", JsonInfer({static_cast<float>(mode), 1.f}));
    EXPECT_EQ(r.status, 500) << "mode " << mode << ": " << r.body;
    EXPECT_TRUE(Contains(r.body, words)) << "mode " << mode << ": " << r.body;
  }
  Tally tally;
  RunConcurrently(6, [&](int client) {
    for (int i = 0; i < 5; ++i) {
      int mode = 1 + (client + i) % 5;
      ModelInferResponse out;
      grpc::Status s = Infer(FloatRequest("wrong_output", {static_cast<float>(mode), 1.f}), &out);
      if (mode == 5) {
        tally.Count(s.ok() &&
                            FromRaw<float>(out.raw_output_contents(0)) == std::vector<float>{10, 2}
                        ? "ok"
                        : "unexpected " + s.error_message());
      } else {
        tally.Count(s.error_code() == grpc::StatusCode::INTERNAL
                        ? "internal"
                        : "unexpected " + s.error_message());
      }
    }
  });
  EXPECT_EQ(tally.counts(), (std::map<std::string, int>{{"internal", 24}, {"ok", 6}}))
      << tally.ToString();
  ModelInferResponse out;
  ASSERT_TRUE(Infer(FloatRequest("wrong_output", {5.f, 1.f}), &out).ok());
  ExpectServes("failing");
}

TEST_F(FaultTest, SysExitIsAModelErrorAndTheSameInterpreterServesOn) {
  MakeRepository({"faults/exits.mpk", "failing.mpk"});
  // One interpreter: the one whose model called sys.exit must be the one that serves next.
  Start({"--model-control-mode=explicit", "--load-model=exits", "--load-model=failing",
         "--interpreters=1"});
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("exits", {1.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
  EXPECT_TRUE(Contains(s.error_message(), "model 'exits' raised SystemExit: 3"))
      << s.error_message();
  EXPECT_TRUE(Contains(s.error_message(), "called sys.exit")) << s.error_message();
  testing::HttpReply r = Http("POST", "/v2/models/exits/infer", JsonInfer({2.f}));
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_TRUE(Contains(r.body, "SystemExit: bye from the model")) << r.body;
  Tally tally;
  RunConcurrently(4, [&](int client) {
    for (int i = 0; i < 4; ++i) {
      bool exit = (client + i) % 2 == 0;
      ModelInferResponse o;
      grpc::Status st = Infer(FloatRequest("exits", {exit ? 1.f : 4.f}), &o);
      if (exit) {
        tally.Count(st.error_code() == grpc::StatusCode::INTERNAL &&
                            Contains(st.error_message(), "SystemExit")
                        ? "internal"
                        : "unexpected " + st.error_message());
      } else {
        tally.Count(st.ok() && FromRaw<float>(o.raw_output_contents(0))[0] == 8.f
                        ? "ok"
                        : "unexpected " + st.error_message());
      }
    }
  });
  EXPECT_EQ(tally.counts(), (std::map<std::string, int>{{"internal", 8}, {"ok", 8}}))
      << tally.ToString();
  ExpectServes("exits");
  ExpectServes("failing");
}

TEST_F(FaultTest, OsExitEndsTheServerWithOneClearLogLineAndNoCallHangs) {
  MakeRepository({"faults/exits.mpk", "failing.mpk"});
  std::string log = (repo_ / "server.log").string();
  server_.set_stderr_path(log);
  Start({"--model-control-mode=explicit", "--load-model=exits", "--load-model=failing"});
  // Traffic to another model while the process goes: every call ends, answered
  // or with the connection's loss (UNAVAILABLE), none hangs.
  std::atomic<bool> stop{false};
  Tally tally;
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        ModelInferResponse out;
        grpc::Status s = Infer(FloatRequest("failing", {2.f}), &out, 10000);
        tally.Count(s.ok() ? "ok"
                    : s.error_code() == grpc::StatusCode::UNAVAILABLE
                        ? "unavailable"
                        : "unexpected " + s.error_message());
        if (!s.ok()) return;
      }
    });
  }
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("exits", {3.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(server_.WaitForExit(30), 7);  // the model's exit status
  stop = true;
  for (auto& c : clients) c.join();
  for (const auto& [kind, count] : tally.counts())
    EXPECT_TRUE(kind == "ok" || kind == "unavailable") << kind;
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(Contains(text, "manypy-server: ERROR model 'exits' called os._exit(7) at ")) << text;
  EXPECT_TRUE(Contains(text, "fault_models.py")) << text;  // where in the model's code
  EXPECT_TRUE(Contains(text, "the server process exits now")) << text;
}

TEST_F(FaultTest, OsExitLineIsOneJsonObjectUnderJsonLogging) {
  MakeRepository({"faults/exits.mpk"});
  std::string log = (repo_ / "server.log").string();
  server_.set_stderr_path(log);
  Start({"--model-control-mode=explicit", "--load-model=exits", "--log-format=json"});
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("exits", {3.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_EQ(server_.WaitForExit(30), 7);
  std::ifstream in(log);
  std::string line, found;
  while (std::getline(in, line)) {
    if (Contains(line, "called os._exit(7)")) found = line;
  }
  // As server/log.cc writes a line under --log-format=json, with the model named.
  EXPECT_EQ(found.rfind("{\"ts\": \"", 0), 0u) << found;
  EXPECT_TRUE(Contains(found, "\"level\": \"ERROR\"")) << found;
  EXPECT_TRUE(Contains(found, "\"msg\": \"model 'exits' called os._exit(7) at ")) << found;
  EXPECT_TRUE(Contains(found, "\"model\": \"exits\"}")) << found;
  EXPECT_FALSE(Contains(found, "manypy-server: ERROR")) << found;
}

TEST_F(FaultTest, ModelWhoseLoadFailsIsRefusedNamingWhyWhileOthersServe) {
  MakeRepository({"faults/fails_to_load.mpk", "failing.mpk"});
  {  // An archive cut short on disk: listed under its file name, with why.
    std::ifstream in(fs::path(MANYPY_TEST_REPOSITORY) / "spin.mpk", std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(repo_ / "cut_short.mpk", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  }
  Start({"--model-control-mode=explicit", "--load-model=failing"});
  std::atomic<bool> stop{false};
  Tally tally;
  std::thread traffic([&] {
    while (!stop) {
      ModelInferResponse out;
      grpc::Status s = Infer(FloatRequest("failing", {2.f}), &out);
      tally.Count(s.ok() ? "ok" : "unexpected " + s.error_message());
    }
  });
  for (int round = 0; round < 2; ++round) {
    grpc::Status s = LoadModel("fails_to_load");
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
    EXPECT_TRUE(
        Contains(s.error_message(), "fails_to_load refuses to load: its weights file is gone"))
        << s.error_message();
    testing::HttpReply r = Http("POST", "/v2/repository/models/fails_to_load/load");
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_TRUE(Contains(r.body, "refuses to load")) << r.body;
    grpc::Status cut = LoadModel("cut_short");
    EXPECT_EQ(cut.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << cut.error_message();
    EXPECT_TRUE(Contains(cut.error_message(), "cut_short.mpk")) << cut.error_message();
  }
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("fails_to_load", {1.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_TRUE(Contains(s.error_message(), "fails_to_load")) << s.error_message();
  stop = true;
  traffic.join();
  EXPECT_GT(tally.counts()["ok"], 0);
  EXPECT_EQ(tally.counts().size(), 1u) << tally.ToString();
  ExpectServes("failing");
}

TEST_F(FaultTest, ErrorsRaisedInTheModelsOwnHelperNameItsFileAndLine) {
  MakeRepository({"faults/raises_in_helper.mpk", "faults/fails_in_helper.mpk"});
  std::string log = (repo_ / "server.log").string();
  server_.set_stderr_path(log);
  Start({"--model-control-mode=explicit", "--load-model=raises_in_helper", "--interpreters=1",
         "--log-level=verbose"});
  // An inference error: the innermost frame in the archive, its source, its callers.
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("raises_in_helper", {-1.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(Contains(s.error_message(),
                       "ValueError: negative input to raises_in_helper: [-1.0] at fault_helpers.py:12 "
                       "in _require_positive: raise ValueError(")) << s.error_message();
  EXPECT_TRUE(Contains(s.error_message(), "(called from fault_helpers.py:7 in check_input; "
                                          "fault_models.py:")) << s.error_message();
  testing::HttpReply r = Http("POST", "/v2/models/raises_in_helper/infer", JsonInfer({-1.f}));
  EXPECT_EQ(r.status, 500);
  EXPECT_TRUE(Contains(r.body, "at fault_helpers.py:12 in _require_positive")) << r.body;
  ExpectServes("raises_in_helper");
  // A load error: in the load's answer and in the index's reason.
  s = LoadModel("fails_in_helper");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(Contains(s.error_message(), "KeyError: \"fails_in_helper: the state has no 'table' "
                                          "entry\" at fault_helpers.py:21 in _require_weights"))
      << s.error_message();
  testing::HttpReply index = Http("POST", "/v2/repository/index", "{}");
  EXPECT_TRUE(Contains(index.body, "at fault_helpers.py:21 in _require_weights")) << index.body;
  // The whole traceback is in the log at verbose level.
  std::string text = ReadLog(log);
  EXPECT_TRUE(Contains(text, "Traceback (most recent call last)")) << text;
  EXPECT_TRUE(Contains(text, "<torch_package_")) << text;
}

TEST_F(FaultTest, ClientLeavingAQueuedRequestDropsItAndTheServerServesOn) {
  MakeRepository({"slow.mpk", "failing.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=slow", "--load-model=failing",
         "--interpreters=1", "--model-config=slow:instance_count=1"});
  std::thread running([&] {
    ModelInferResponse out;
    grpc::Status s = Infer(SlowRequest(6000), &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
  });
  // EXPECT, not ASSERT, while threads run: a failed ASSERT would leave them unjoined.
  EXPECT_TRUE(WaitForMetric("manypy_in_flight_executions", "slow", 1));
  // gRPC: a queued call cancelled by its client.
  grpc::ClientContext ctx;
  ModelInferResponse cancelled_out;
  std::atomic<int> grpc_code{-1};
  std::thread queued(
      [&] { grpc_code = stub_->ModelInfer(&ctx, SlowRequest(1), &cancelled_out).error_code(); });
  EXPECT_TRUE(WaitForMetric("manypy_queued_requests", "slow", 1));
  ctx.TryCancel();
  queued.join();
  EXPECT_EQ(grpc_code.load(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitForMetric("manypy_queued_requests", "slow", 0));  // dropped, not run
  // HTTP: a queued request whose connection the client closes.
  HttpInferThenLeave("slow",
                     R"({"inputs":[{"name":"MS","datatype":"INT64","shape":[1,1],"data":[1]}]})",
                     "manypy_queued_requests");
  EXPECT_TRUE(WaitForMetric("manypy_queued_requests", "slow", 0));
  // Both left while the 6 s call still ran: neither was executed.
  EXPECT_EQ(Metric("manypy_in_flight_executions", "slow"), 1);
  running.join();
  ExpectIdle("slow");
  EXPECT_EQ(Statistics("slow").execution_count(), 1u) << "a request whose client left was run";
  // gRPC: a running call cancelled by its client ends; the server finishes it quietly.
  {
    grpc::ClientContext running_ctx;
    std::thread cancel([&] {
      if (WaitForMetric("manypy_in_flight_executions", "slow", 1)) running_ctx.TryCancel();
    });
    ModelInferResponse o;
    EXPECT_EQ(stub_->ModelInfer(&running_ctx, SlowRequest(500), &o).error_code(),
              grpc::StatusCode::CANCELLED);
    cancel.join();
  }
  ExpectIdle("slow");
  ModelInferResponse out;
  grpc::Status s = Infer(SlowRequest(1), &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  ExpectServes("failing");
}

TEST_F(FaultTest, ClientLeavingARunningCallInterruptsItAndTheInterpreterServesOn) {
  MakeRepository({"spin.mpk"});
  std::string log = (repo_ / "server.log").string();
  server_.set_stderr_path(log);
  // One interpreter, no execution limit: spin(-1) would hold it for ever.
  Start({"--model-control-mode=explicit", "--load-model=spin", "--interpreters=1"});
  {  // gRPC: the client cancels while the call runs.
    grpc::ClientContext ctx;
    std::thread cancel([&] {
      if (WaitForMetric("manypy_in_flight_executions", "spin", 1)) ctx.TryCancel();
    });
    ModelInferResponse out;
    EXPECT_EQ(stub_->ModelInfer(&ctx, FloatRequest("spin", {-1.f}), &out).error_code(),
              grpc::StatusCode::CANCELLED);
    cancel.join();
  }
  ExpectIdle("spin");
  // HTTP: the client closes its connection while the call runs.
  HttpInferThenLeave("spin", JsonInfer({-1.f}), "manypy_in_flight_executions");
  ExpectIdle("spin");
  ExpectServes("spin");  // the one interpreter is free again
  // Each counted once, as cancelled: the client's doing, not a failure.
  auto stats = Statistics("spin").inference_stats();
  EXPECT_EQ(stats.cancel().count(), 2u);
  EXPECT_EQ(stats.fail().count(), 0u);
  EXPECT_EQ(MetricWith("manypy_requests_total", "spin", "outcome=\"cancelled\""), 2);
  EXPECT_EQ(MetricWith("manypy_requests_total", "spin", "outcome=\"deadline_exceeded\""), 0);
  EXPECT_EQ(MetricWith("manypy_requests_total", "spin", "outcome=\"success\""), 2);
  // Logged at INFO, never as a WARNING (a model fault).
  std::string text = ReadLog(log);
  EXPECT_FALSE(Contains(text, "WARNING")) << text;
  EXPECT_TRUE(Contains(text, "INFO request '' to spin cancelled: CANCELLED: the client left its "
                             "request to model 'spin' while it ran")) << text;
}

TEST_F(FaultTest, ClientLeavingAQueuedRequestIsCountedOnceAsCancelled) {
  MakeRepository({"slow.mpk"});
  std::string log = (repo_ / "server.log").string();
  server_.set_stderr_path(log);
  Start({"--model-control-mode=explicit", "--load-model=slow", "--interpreters=1",
         "--model-config=slow:instance_count=1"});
  std::thread running([&] {
    ModelInferResponse out;
    EXPECT_TRUE(Infer(SlowRequest(3000), &out).ok());
  });
  EXPECT_TRUE(WaitForMetric("manypy_in_flight_executions", "slow", 1));
  grpc::ClientContext ctx;
  std::thread queued([&] {
    ModelInferResponse out;
    EXPECT_EQ(stub_->ModelInfer(&ctx, SlowRequest(1), &out).error_code(), grpc::StatusCode::CANCELLED);
  });
  EXPECT_TRUE(WaitForMetric("manypy_queued_requests", "slow", 1));
  ctx.TryCancel();
  queued.join();
  HttpInferThenLeave("slow", R"({"inputs":[{"name":"MS","datatype":"INT64","shape":[1,1],"data":[1]}]})",
                     "manypy_queued_requests");
  running.join();
  ExpectIdle("slow");
  EXPECT_TRUE(WaitForMetric("manypy_requests_total", "slow", 3));  // 1 answered, 2 cancelled
  EXPECT_EQ(MetricWith("manypy_requests_total", "slow", "outcome=\"cancelled\""), 2);
  auto stats = Statistics("slow").inference_stats();
  EXPECT_EQ(stats.cancel().count(), 2u);
  EXPECT_EQ(stats.fail().count(), 0u);
  std::string text = ReadLog(log);
  EXPECT_FALSE(Contains(text, "WARNING")) << text;
  EXPECT_TRUE(Contains(text, "cancelled: CANCELLED: the client cancelled its request to model "
                             "'slow' before it ran")) << text;
}

TEST_F(FaultTest, HttpTimeoutPassingMidCallInterruptsItAndTheInterpreterServesOn) {
  MakeRepository({"spin.mpk"});
  // One interpreter and no execution limit: only the request's own timeout can end spin(-1).
  Start({"--model-control-mode=explicit", "--load-model=spin", "--interpreters=1"});
  Clock::time_point start = Clock::now();
  testing::HttpReply r = Http("POST", "/v2/models/spin/infer",
                              R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1],"data":[-1]}],)"
                              R"("parameters":{"timeout":300000}})");
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_TRUE(Contains(r.body, "the deadline of the request to model 'spin' passed while it ran; "
                               "the call was interrupted after ")) << r.body;
  EXPECT_LT(seconds, 5.0);
  // A gRPC deadline alike: the client stops waiting and the server stops the call.
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("spin", {-1.f}), &out, 300);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << s.error_message();
  ExpectIdle("spin");
  ExpectServes("spin");  // the one interpreter serves the next request
  auto stats = Statistics("spin").inference_stats();
  EXPECT_EQ(stats.fail().count(), 2u);
  EXPECT_EQ(stats.cancel().count(), 0u);
  EXPECT_EQ(MetricWith("manypy_requests_total", "spin", "outcome=\"deadline_exceeded\""), 2);
}

TEST_F(FaultTest, HttpBodiesThatDoNotDecodeAreCountedOnce) {
  MakeRepository({"spin.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=spin"});
  for (const char* body : {"{not json", "{}",
                           R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[3],"data":[1,2]}]})"}) {
    testing::HttpReply r = Http("POST", "/v2/models/spin/infer", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
  // A malformed body for a model that is not loaded: counted under its name too.
  EXPECT_EQ(Http("POST", "/v2/models/absent/infer", "{not json").status, 400);
  EXPECT_EQ(MetricWith("manypy_requests_total", "spin", "outcome=\"invalid_argument\""), 3);
  EXPECT_EQ(MetricWith("manypy_requests_total", "absent", "outcome=\"invalid_argument\""), 1);
  EXPECT_EQ(Statistics("spin").inference_stats().fail().count(), 3u);
}

TEST_F(FaultTest, ExplicitModeNamesAModelThatIsInTheRepositoryButNotLoaded) {
  MakeRepository({"spin.mpk", "failing.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=failing"});
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("spin", {1.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Contains(s.error_message(), "model 'spin' is in the repository but not loaded: load it "
                                          "first")) << s.error_message();
  testing::HttpReply r = Http("POST", "/v2/models/spin/infer", JsonInfer({1.f}));
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(Contains(r.body, "/v2/repository/models/spin/load")) << r.body;
  testing::HttpReply index = Http("POST", "/v2/repository/index", "{}");
  EXPECT_TRUE(Contains(index.body, "is in the repository but not loaded")) << index.body;
  // A name the repository lacks is still plainly unknown.
  s = Infer(FloatRequest("nowhere", {1.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "unknown model 'nowhere'");
}

TEST_F(FaultTest, StreamCancelledWithRequestsInFlightLeavesNothingBehind) {
  MakeRepository({"slow.mpk", "failing.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=slow", "--load-model=failing",
         "--interpreters=1", "--model-config=slow:instance_count=1"});
  {
    grpc::ClientContext ctx;
    auto stream = stub_->ModelStreamInfer(&ctx);
    // The first runs 4 s, long enough for the other four to be seen queued behind it.
    for (int i = 0; i < 5; ++i)
      ASSERT_TRUE(stream->Write(SlowRequest(i == 0 ? 4000 : 1000, "s" + std::to_string(i))));
    ASSERT_TRUE(WaitForMetric("manypy_queued_requests", "slow", 4));
    ctx.TryCancel();
    inference::ModelStreamInferResponse response;
    while (stream->Read(&response)) {
    }
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ExpectIdle("slow");
  // The four queued behind the running one were dropped, not run.
  EXPECT_EQ(Statistics("slow").execution_count(), 1u);
  ModelInferResponse out;
  EXPECT_TRUE(Infer(SlowRequest(1), &out).ok());
  ExpectServes("failing");
}

TEST_F(FaultTest, LoadUnloadStormUnderTrafficAnswersEveryRequestClearly) {
  MakeRepository({"failing.mpk", "spin.mpk"});
  Start({"--model-control-mode=explicit", "--load-model=failing", "--load-model=spin"});
  std::atomic<bool> stop{false};
  Tally tally;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      while (!stop) {
        if (c == 3) {
          testing::HttpReply r = Http("POST", "/v2/models/failing/infer", JsonInfer({2.f}));
          bool not_ready = (r.status == 503 || r.status == 404) && Contains(r.body, "failing");
          tally.Count(r.status == 200 ? "ok"
                      : not_ready     ? "not ready"
                                      : "unexpected HTTP " + r.body);
          continue;
        }
        ModelInferResponse out;
        grpc::Status s = Infer(FloatRequest("failing", {2.f}), &out);
        bool not_ready = (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                          s.error_code() == grpc::StatusCode::NOT_FOUND) &&
                         Contains(s.error_message(), "failing");
        if (s.ok() && FromRaw<float>(out.raw_output_contents(0))[0] == 4.f) {
          tally.Count("ok");
        } else {
          tally.Count(not_ready ? "not ready" : "unexpected " + s.error_message());
        }
      }
    });
  }
  // Two threads load and unload the same model, racing each other and the
  // traffic: an unload that finds it already unloaded is told so.
  Tally changes;
  RunConcurrently(2, [&](int who) {
    for (int i = 0; i < 6; ++i) {
      grpc::Status s = (i + who) % 2 == 0 ? UnloadModel("failing") : LoadModel("failing");
      changes.Count(s.ok() ? "ok"
                    : Contains(s.error_message(), "model 'failing' is not loaded")
                        ? "already unloaded"
                        : "unexpected " + std::to_string(s.error_code()) + " " + s.error_message());
    }
  });
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(changes.Total(), 12);
  for (const auto& [kind, count] : changes.counts()) {
    EXPECT_TRUE(kind == "ok" || kind == "already unloaded") << kind << " x" << count;
  }
  auto counts = tally.counts();
  for (const auto& [kind, count] : counts) {
    EXPECT_TRUE(kind == "ok" || kind == "not ready") << kind << " x" << count;
  }
  EXPECT_GT(counts["ok"], 0) << tally.ToString();
  ASSERT_TRUE(LoadModel("failing").ok());
  ExpectServes("failing");
  ExpectServes("spin");
  ExpectIdle("failing");
}

// Archives replaced on disk while loaded: scaled version 1 multiplies by 2,
// version 2 by 3, reading the factor from the end of an 8 MiB stored weight.
TEST_F(FaultTest, ArchiveReplacedByRenameServesTheOldVersionUntilReload) {
  MakeRepository({"swap/scaled_v1.mpk", "failing.mpk"});
  fs::rename(repo_ / "scaled_v1.mpk", repo_ / "scaled.mpk");
  Start({"--model-control-mode=explicit", "--load-model=scaled", "--load-model=failing"});
  auto scaled = [&](std::string* version) {
    ModelInferResponse out;
    grpc::Status s = Infer(FloatRequest("scaled", {1.f, 2.f}), &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (version) *version = out.model_version();
    return s.ok() ? FromRaw<float>(out.raw_output_contents(0)) : std::vector<float>{};
  };
  std::string version;
  ASSERT_EQ(scaled(&version), (std::vector<float>{2, 4}));
  // A deployment tool's way: write the new archive beside it, rename over it.
  fs::copy_file(fs::path(MANYPY_TEST_REPOSITORY) / "swap/scaled_v2.mpk", repo_ / "scaled.mpk.tmp");
  fs::rename(repo_ / "scaled.mpk.tmp", repo_ / "scaled.mpk");
  EXPECT_EQ(scaled(&version), (std::vector<float>{2, 4}));
  EXPECT_EQ(version, "1");
  ASSERT_TRUE(LoadModel("scaled").ok());
  EXPECT_EQ(scaled(&version), (std::vector<float>{3, 6}));
  EXPECT_EQ(version, "2");
  ExpectServes("failing");
}

TEST_F(FaultTest, ArchiveTruncatedOrRewrittenInPlaceKeepsServingWithoutACrash) {
  MakeRepository({"swap/scaled_v1.mpk", "failing.mpk"});
  fs::path archive = repo_ / "scaled_v1.mpk";
  Start({"--model-control-mode=explicit", "--load-model=scaled", "--load-model=failing"});
  std::atomic<bool> stop{false};
  Tally tally;
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&] {
      while (!stop) {
        ModelInferResponse out;
        grpc::Status s = Infer(FloatRequest("scaled", {1.f, 2.f}), &out);
        tally.Count(s.ok() && FromRaw<float>(out.raw_output_contents(0)) == std::vector<float>{2, 4}
                        ? "ok"
                        : "unexpected " + std::to_string(s.error_code()) + " " + s.error_message());
      }
    });
  }
  auto answered_more_than = [&](int n) {
    for (auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
      if (tally.Total() > n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  };
  // EXPECT, not ASSERT, while the clients run: a failed ASSERT would leave them unjoined.
  EXPECT_TRUE(answered_more_than(5));
  // Truncated in place (a mapping of this file would SIGBUS on the next weight read)...
  fs::resize_file(archive, 0);
  EXPECT_TRUE(answered_more_than(tally.Total() + 10));
  // ...then rewritten in place with another archive (version 2's bytes, same inode).
  {
    std::ifstream in(fs::path(MANYPY_TEST_REPOSITORY) / "swap/scaled_v2.mpk", std::ios::binary);
    std::ofstream out(archive, std::ios::binary | std::ios::in | std::ios::out);
    out << in.rdbuf();
  }
  EXPECT_TRUE(answered_more_than(tally.Total() + 10));
  stop = true;
  for (auto& c : clients) c.join();
  EXPECT_EQ(tally.counts().size(), 1u) << tally.ToString();
  EXPECT_GT(tally.counts()["ok"], 25);
  // The server is alive and the rewritten file, now version 2, loads.
  ASSERT_TRUE(LoadModel("scaled").ok());
  ModelInferResponse out;
  ASSERT_TRUE(Infer(FloatRequest("scaled", {1.f, 2.f}), &out).ok());
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{3, 6}));
  ExpectServes("failing");
}

}  // namespace
}  // namespace manypy
