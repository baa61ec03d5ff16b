// CompositionTest: models that call models (manypy.infer / manypy.submit)
// against the real manypy-server: outputs, statistics of the callee, fan-out,
// no deadlock with more callers than interpreters, a refused cycle, the
// callee's errors reaching the caller, the caller's deadline carried over,
// manypy.request and manypy.log; on demand, a callee that is not loaded.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

/// probe's request: MODE and a one-element INPUT__0.
ModelInferRequest Probe(const std::string& mode) {
  ModelInferRequest r = FloatRequest("probe", {1.f});
  auto* m = r.add_inputs();
  m->set_name("MODE");
  m->set_datatype("BYTES");
  m->add_shape(1);
  std::string raw(4, '\0');
  uint32_t n = static_cast<uint32_t>(mode.size());
  memcpy(raw.data(), &n, 4);
  r.add_raw_input_contents(raw + mode);
  return r;
}

std::string Text(const ModelInferResponse& out) { return out.raw_output_contents(0).substr(4); }

class CompositionTest : public ServerTest {
 protected:
  void Start(std::vector<std::string> args = {}) {
    args.push_back(std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/composition");
    StartServer(std::move(args));
  }
  std::string ProbeText(const std::string& mode, int deadline_ms = 30000) {
    ModelInferResponse out;
    grpc::Status s = Infer(Probe(mode), &out, deadline_ms);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return s.ok() ? Text(out) : "";
  }
};

TEST_F(CompositionTest, ANestedCallReturnsTheCalleesOutputsAndCountsInItsStatistics) {
  Start();
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("calls_double", {1.f, 2.5f}), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{3.f, 6.f}));
  EXPECT_EQ(Statistics("double").inference_stats().success().count(), 1u);
  EXPECT_EQ(Statistics("calls_double").inference_stats().success().count(), 1u);
  // Four calls submitted at once, then waited for.
  s = Infer(FloatRequest("fan_out", {1.f}), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{2.f + 4 + 6 + 8}));
  EXPECT_EQ(Statistics("double").inference_stats().success().count(), 5u);
}

// The generate extension serves ordinary models too (here a callee and its caller).
TEST_F(CompositionTest, GenerateAndGenerateStreamServeOrdinaryModels) {
  Start();
  testing::HttpConnection connection(server_.http_port());
  testing::HttpReply reply = connection.Send("POST", "/v2/models/calls_double/generate",
                                             R"({"INPUT__0": [1.5, 2], "id": "g"})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.body, R"({"model_name":"calls_double","model_version":"1","id":"g","OUTPUT__0":[4.0,5.0]})");
  testing::HttpConnection again(server_.http_port());
  reply = again.Send("POST", "/v2/models/double/generate_stream", R"({"INPUT__0": 3})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(reply.body, "data: {\"model_name\":\"double\",\"model_version\":\"1\",\"OUTPUT__0\":6.0}\n\n");
}

TEST_F(CompositionTest, MoreCallersThanInterpretersAllFinish) {
  // Every interpreter can be held by a caller waiting for its callee: the
  // waiting caller runs its callee itself.
  Start({"--interpreters=2"});
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 20; ++i) {
        ModelInferResponse out;
        grpc::Status s = Infer(FloatRequest(c % 2 ? "fan_out" : "calls_double", {float(i)}), &out, 30000);
        (s.ok() ? ok : failed)++;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 320);
  EXPECT_EQ(failed.load(), 0);
}

TEST_F(CompositionTest, ACycleIsRefusedNamingTheChain) {
  Start();
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("cycle_a", {1.f}), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_TRUE(Contains(s.error_message(), "FAILED_PRECONDITION: model 'cycle_b' calls model "
                                          "'cycle_a', which is already running this call "
                                          "(cycle_a -> cycle_b -> cycle_a): a cycle, refused"))
      << s.error_message();
  // And both serve on: cycle_b alone is refused the same way, one level down.
  s = Infer(FloatRequest("cycle_b", {1.f}), &out);
  EXPECT_TRUE(Contains(s.error_message(), "(cycle_b -> cycle_a -> cycle_b)")) << s.error_message();
}

TEST_F(CompositionTest, TheCalleesErrorsReachTheCallerAsInferenceErrorWithStatusAndMessage) {
  Start();
  EXPECT_EQ(ProbeText("unknown"),
            R"({"status": "NOT_FOUND", "message": "unknown model 'no_such_model'", "type": "InferenceError"})");
  EXPECT_TRUE(Contains(ProbeText("bad_input"),
                       R"J("status": "INVALID_ARGUMENT", "message": "model 'double' has no input 'WRONG' (its inputs: INPUT__0)")J"));
  EXPECT_TRUE(Contains(ProbeText("wrong_dtype"),
                       "input 'INPUT__0' of model 'double' is FP32 (torch.Float), got a tensor of torch.Long"));
  // Refused requests count in the callee's statistics, once each.
  EXPECT_EQ(Statistics("double").inference_stats().fail().count(), 2u);
}

// On demand, a nested call does not load its callee (the load would wait for
// the caller's interpreter): it is refused saying so, and served once a
// client's request has loaded the callee.
TEST_F(CompositionTest, OnDemandANestedCallToAModelNotLoadedSaysToPinIt) {
  Start({"--model-control-mode=on-demand", "--load-model=calls_double"});
  ModelInferResponse out;
  grpc::Status s = Infer(FloatRequest("calls_double", {1.f}), &out);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.error_message(),
                       "NOT_FOUND: model 'double' is not loaded, and manypy.infer does not load "
                       "a model on demand (the load would wait for the interpreter this call "
                       "holds): pin the models that other models call with --load-model"))
      << s.error_message();
  EXPECT_EQ(Statistics("calls_double").inference_stats().fail().count(), 1u);
  // A model the repository does not have is still just unknown (probe loads
  // on this first request).
  EXPECT_TRUE(Contains(ProbeText("unknown"), R"("message": "unknown model 'no_such_model'")"));
  // A client's request loads double; then the nested call is served.
  s = Infer(FloatRequest("double", {1.f}), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  s = Infer(FloatRequest("calls_double", {1.f, 2.5f}), &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(FromRaw<float>(out.raw_output_contents(0)), (std::vector<float>{3.f, 6.f}));
}

TEST_F(CompositionTest, ASequenceModelCannotBeCalledAndOtherModelsHaveNoSequenceState) {
  Start({"--model-config=double:sequence_batching=true"});
  std::string text = ProbeText("double_in_sequence");
  EXPECT_TRUE(Contains(text, R"("status": "INVALID_ARGUMENT")")) << text;
  EXPECT_TRUE(
      Contains(text, "model 'double' keeps stateful sequences; manypy.infer cannot call it"))
      << text;
  EXPECT_EQ(ProbeText("state"), R"({"state": null, "sequence_id": null})");
}

TEST_F(CompositionTest, TheCallersDeadlineAndTimeoutsCarryOver) {
  Start();
  std::string text = ProbeText("timeout");
  EXPECT_TRUE(Contains(text, R"("status": "DEADLINE_EXCEEDED")")) << text;
  EXPECT_TRUE(Contains(text, "slow_double")) << text;
  // A call submitted and never waited for is waited for when its caller returns.
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ProbeText("leak"), R"({"submitted": true})");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
  EXPECT_EQ(Statistics("slow_double").inference_stats().success().count(), 1u);
}

TEST_F(CompositionTest, AModelsOwnMetricsAreOnMetricsWithItsModelAndVersion) {
  Start();
  EXPECT_EQ(ProbeText("metric"), R"({"counted": true})");
  EXPECT_EQ(ProbeText("metric"), R"({"counted": true})");
  EXPECT_EQ(ProbeText("metric_twice"),
            R"({"ValueError": "metric 'probe_calls_total' is declared already as a counter, not a gauge"})");
  testing::HttpConnection connection(server_.metrics_port());
  std::string text = connection.Send("GET", "/metrics").body;
  EXPECT_TRUE(Contains(text, "# HELP probe_calls_total probe's calls by mode")) << text;
  EXPECT_TRUE(Contains(text, R"(probe_calls_total{mode="metric",model="probe",version="1"} 2)")) << text;
  EXPECT_TRUE(Contains(text, R"(probe_seconds_count{model="probe",version="1"} 2)")) << text;
  EXPECT_TRUE(Contains(text, R"(probe_seconds_bucket{model="probe",version="1",le="0.01"} 2)")) << text;
}

TEST_F(CompositionTest, TheExamplePipelineAnswersAsItsDetectorDoesAndClassifiesEachBox) {
  // models/detect_and_classify over the example repository's detector and classifier.
  StartServer({"--model-control-mode=explicit", "--load-model=fasterrcnn_mobilenet_v3_large_320_fpn",
               "--load-model=mobilenet_v3_small", "--load-model=detect_and_classify"});
  ModelInferRequest image;
  auto* in = image.add_inputs();
  in->set_name("INPUT__0");
  in->set_datatype("FP32");
  for (int64_t d : {1, 3, 120, 160}) in->add_shape(d);
  std::vector<float> pixels(3 * 120 * 160);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>((i * 7919) % 1000) / 1000.f;
  image.add_raw_input_contents(Raw(pixels));
  image.set_model_name("detect_and_classify");
  ModelInferResponse pipeline, detector;
  grpc::Status s = Infer(image, &pipeline, 60000);
  ASSERT_TRUE(s.ok()) << s.error_message();
  image.set_model_name("fasterrcnn_mobilenet_v3_large_320_fpn");
  s = Infer(image, &detector, 60000);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto boxes = FromRaw<float>(pipeline.raw_output_contents(0));
  auto classes = FromRaw<int64_t>(pipeline.raw_output_contents(2));
  auto found = FromRaw<float>(detector.raw_output_contents(0));
  ASSERT_FALSE(classes.empty());
  ASSERT_EQ(boxes.size(), 4 * classes.size());
  if (!found.empty()) {  // its best boxes, bit-equal to the detector's own answer
    found.resize(std::min(found.size(), boxes.size()));
    EXPECT_EQ(std::vector<float>(boxes.begin(), boxes.begin() + found.size()), found);
  }
  for (int64_t c : classes) {
    EXPECT_GE(c, 0);
    EXPECT_LT(c, 1000);
  }
  // Each model counted its own request: the detector twice, the classifier once.
  EXPECT_EQ(Statistics("fasterrcnn_mobilenet_v3_large_320_fpn").inference_stats().success().count(), 2u);
  EXPECT_EQ(Statistics("mobilenet_v3_small").inference_stats().success().count(), 1u);
}

TEST_F(CompositionTest, AClientThatLeavesEndsItsCallersNestedCalls) {
  Start();
  {
    testing::HttpConnection connection(server_.http_port());
    std::string body = R"({"inputs":[{"name":"MODE","datatype":"BYTES","shape":[1],"data":["slow_chain"]},)"
                       R"({"name":"INPUT__0","datatype":"FP32","shape":[1],"data":[1]}]})";
    connection.WriteRaw("POST /v2/models/probe/infer HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body);
    std::this_thread::sleep_for(700ms);  // two or three of its twenty 0.3 s calls
  }  // the client leaves
  inference::ModelStatistics probe;
  for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(20ms)) {
    probe = Statistics("probe");
    if (probe.inference_stats().cancel().count() + probe.inference_stats().fail().count() > 0) break;
  }
  // Ended once: cancelled, or failed on its nested call's CANCELLED if the
  // interrupt reached the callee before the caller.
  EXPECT_EQ(probe.inference_stats().cancel().count() + probe.inference_stats().fail().count(), 1u)
      << probe.DebugString();
  inference::ModelStatistics slow = Statistics("slow_double");
  // The nested call running when the client left was cancelled with it; no more were made.
  EXPECT_GE(slow.inference_stats().cancel().count(), 1u) << slow.DebugString();
  EXPECT_LT(slow.inference_stats().success().count(), 6u) << slow.DebugString();
}

TEST_F(CompositionTest, ManypyRequestAndLog) {
  fs::path log = fs::temp_directory_path() / ("manypy_composition_" + std::to_string(getpid()) + ".log");
  server_.set_stderr_path(log.string());
  Start({"--log-format=json"});
  ModelInferRequest r = Probe("request");
  r.set_id("req-9");
  (*r.mutable_parameters())["p"].set_int64_param(7);
  (*r.mutable_parameters())["tag"].set_string_param("x");
  ModelInferResponse out;
  grpc::Status s = Infer(r, &out, 5000);
  ASSERT_TRUE(s.ok()) << s.error_message();
  std::string text = Text(out);
  EXPECT_TRUE(Contains(text, R"("id": "req-9")")) << text;
  // A protobuf map: in no particular order.
  EXPECT_TRUE(Contains(text, R"("p": 7)") && Contains(text, R"("tag": "x")")) << text;
  EXPECT_TRUE(Contains(text, R"("client_left": false)")) << text;
  double left = std::stod(text.substr(text.find("\"seconds_left\": ") + 16));
  EXPECT_GT(left, 3.0);
  EXPECT_LE(left, 5.0);
  EXPECT_EQ(ProbeText("log"), R"({"logged": true})");
  std::ifstream in(log);
  std::stringstream lines;
  lines << in.rdbuf();
  EXPECT_TRUE(Contains(lines.str(), R"("level": "INFO", "msg": "model 'probe': probe says hello answer=42 who=probe", "model": "probe", "answer": 42, "who": "probe")"))
      << lines.str().substr(0, 4000);
  fs::remove(log);
}

}  // namespace
}  // namespace manypy
