// Stateful sequences end to end (the real server, gRPC and HTTP) on the
// gru_stream example: a sequence sent in chunks answers as the whole input
// run at once; two interleaved sequences on one interpreter keep their own
// states; every refusal (no sequence_id, never started, already ended, timed
// out, already active, beyond the limit) over both protocols, each counted
// once as a failure; an idle sequence times out with an INFO line, and its
// state is gone when its id starts again.
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;

constexpr int kFeatures = 8;
constexpr int kHidden = 16;

// `frames` rows of deterministic pseudo-random features (seeded by `seed`).
std::vector<float> Frames(int frames, int seed) {
  std::vector<float> v(static_cast<size_t>(frames) * kFeatures);
  uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>((x >> 8) % 2001) / 1000.f - 1.f;
  }
  return v;
}

std::vector<float> Rows(const std::vector<float>& frames, int from, int to) {
  return {frames.begin() + from * kFeatures, frames.begin() + to * kFeatures};
}

struct Seq {
  std::string id;  // digits: an integer id; else a string id; empty: none
  bool start = false;
  bool end = false;
};

bool IsNumber(const std::string& id) {
  return !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
}

ModelInferRequest GruRequest(const std::vector<float>& frames, const Seq& s) {
  ModelInferRequest r;
  r.set_model_name("gru_stream");
  auto* in = r.add_inputs();
  in->set_name("frames");
  in->set_datatype("FP32");
  in->add_shape(static_cast<int64_t>(frames.size() / kFeatures));
  in->add_shape(kFeatures);
  r.add_raw_input_contents(Raw(frames));
  auto& p = *r.mutable_parameters();
  if (IsNumber(s.id)) {
    p["sequence_id"].set_uint64_param(std::stoull(s.id));
  } else if (!s.id.empty()) {
    p["sequence_id"].set_string_param(s.id);
  }
  if (s.start) p["sequence_start"].set_bool_param(true);
  if (s.end) p["sequence_end"].set_bool_param(true);
  return r;
}

std::string GruJson(const std::vector<float>& frames, const Seq& s) {
  std::ostringstream body;
  body << R"({"parameters": {)";
  std::vector<std::string> params;
  if (!s.id.empty()) {
    params.push_back(R"("sequence_id": )" + (IsNumber(s.id) ? s.id : "\"" + s.id + "\""));
  }
  if (s.start) params.push_back(R"("sequence_start": true)");
  if (s.end) params.push_back(R"("sequence_end": true)");
  for (size_t i = 0; i < params.size(); ++i) body << (i ? ", " : "") << params[i];
  body << R"(}, "inputs": [{"name": "frames", "datatype": "FP32", "shape": [)"
       << frames.size() / kFeatures << ", " << kFeatures << R"(], "data": [)";
  for (size_t i = 0; i < frames.size(); ++i) body << (i ? ", " : "") << frames[i];
  body << "]}]}";
  return body.str();
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 1e-5) << "element " << i;
  }
}

class SequenceTest : public ServerTest {
 protected:
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--model-control-mode=explicit", "--load-model=gru_stream",
                                     "--interpreters=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    StartServer(args);
  }
  /// The hidden outputs of one request over gRPC; fails the test on an error.
  std::vector<float> Run(const std::vector<float>& frames, const Seq& s) {
    ModelInferResponse out;
    grpc::Status status = Infer(GruRequest(frames, s), &out);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok() || out.raw_output_contents_size() != 1) return {};
    return FromRaw<float>(out.raw_output_contents(0));
  }
  grpc::Status Refused(const std::vector<float>& frames, const Seq& s) {
    ModelInferResponse out;
    return Infer(GruRequest(frames, s), &out);
  }
  testing::HttpReply Http(const std::vector<float>& frames, const Seq& s) {
    testing::HttpConnection http(server_.http_port());
    return http.Send("POST", "/v2/models/gru_stream/infer", GruJson(frames, s));
  }
  std::vector<float> RunHttp(const std::vector<float>& frames, const Seq& s) {
    testing::HttpReply reply = Http(frames, s);
    EXPECT_EQ(reply.status, 200) << reply.body;
    rapidjson::Document doc;
    doc.Parse(reply.body.c_str());
    std::vector<float> v;
    if (!doc.IsObject() || !doc.HasMember("outputs")) return v;
    for (const auto& x : doc["outputs"][0]["data"].GetArray()) v.push_back(x.GetFloat());
    return v;
  }
  /// A sequence of one request: the whole input at once, from a zero state.
  std::vector<float> Whole(const std::vector<float>& frames, const std::string& id) {
    return Run(frames, {id, true, true});
  }
};

TEST_F(SequenceTest, TwoInterleavedSequencesOnOneInterpreterEqualTheirWholeRuns) {
  Start();
  std::vector<float> a = Frames(12, 1), b = Frames(12, 2);
  std::vector<float> whole_a = Whole(a, "100"), whole_b = Whole(b, "101");
  ASSERT_EQ(whole_a.size(), 12u * kHidden);
  ASSERT_NE(whole_a, whole_b);

  // One interpreter runs both; a by an integer id over gRPC, b by a string
  // id over HTTP, chunk by chunk in turns.
  std::vector<float> got_a, got_b, part;
  const int cuts[] = {0, 5, 9, 12};
  for (int c = 0; c < 3; ++c) {
    bool first = c == 0, last = c == 2;
    part = Run(Rows(a, cuts[c], cuts[c + 1]), {"7", first, last});
    got_a.insert(got_a.end(), part.begin(), part.end());
    part = RunHttp(Rows(b, cuts[c], cuts[c + 1]), {"stream-b", first, last});
    got_b.insert(got_b.end(), part.begin(), part.end());
  }
  ExpectNear(got_a, whole_a);
  ExpectNear(got_b, whole_b);

  // And the other way round: a over HTTP with a string id, b over gRPC.
  got_a.clear(), got_b.clear();
  for (int c = 0; c < 3; ++c) {
    bool first = c == 0, last = c == 2;
    part = RunHttp(Rows(a, cuts[c], cuts[c + 1]), {"stream-a", first, last});
    got_a.insert(got_a.end(), part.begin(), part.end());
    part = Run(Rows(b, cuts[c], cuts[c + 1]), {"8", first, last});
    got_b.insert(got_b.end(), part.begin(), part.end());
  }
  ExpectNear(got_a, whole_a);
  ExpectNear(got_b, whole_b);
  inference::ModelStatistics stats = Statistics("gru_stream");
  EXPECT_EQ(stats.inference_stats().success().count(), 14u);
  EXPECT_EQ(stats.inference_stats().fail().count(), 0u);
}

TEST_F(SequenceTest, EachRefusalOverBothProtocolsSaysWhichAndIsCountedOnce) {
  Start({"--model-config=gru_stream:max_concurrent_sequences=2"});
  std::vector<float> x = Frames(3, 3);
  int refused = 0;
  auto expect = [&](const Seq& s, grpc::StatusCode code, int http_status, const std::string& says) {
    grpc::Status g = Refused(x, s);
    EXPECT_EQ(g.error_code(), code) << g.error_message();
    EXPECT_NE(g.error_message().find(says), std::string::npos) << g.error_message();
    EXPECT_NE(g.error_message().find("model 'gru_stream'"), std::string::npos) << g.error_message();
    testing::HttpReply h = Http(x, s);
    EXPECT_EQ(h.status, http_status) << h.body;
    EXPECT_NE(h.body.find(says), std::string::npos) << h.body;
    refused += 2;
  };
  expect({}, grpc::StatusCode::INVALID_ARGUMENT, 400, "needs the parameter sequence_id");
  expect({"55"}, grpc::StatusCode::INVALID_ARGUMENT, 400,
         "sequence 55 of model 'gru_stream' was never started");
  expect({"never"}, grpc::StatusCode::INVALID_ARGUMENT, 400,
         "sequence 'never' of model 'gru_stream' was never started");

  std::vector<float> fresh = Whole(x, "56");  // started and ended at once
  expect({"56"}, grpc::StatusCode::INVALID_ARGUMENT, 400,
         "sequence 56 of model 'gru_stream' has already ended");
  expect({"56", false, true}, grpc::StatusCode::INVALID_ARGUMENT, 400, "has already ended");

  Run(x, {"1", true});
  Run(x, {"2", true});
  expect({"1", true}, grpc::StatusCode::INVALID_ARGUMENT, 400,
         "sequence 1 of model 'gru_stream' is already active");
  expect({"3", true}, grpc::StatusCode::RESOURCE_EXHAUSTED, 429, "max_concurrent_sequences 2");

  // The server serves on: an end frees a place, and an ended id starts anew
  // from a zero state (its old state was dropped at its end).
  Run(x, {"1", false, true});
  ExpectNear(Run(x, {"56", true}), fresh);
  Run(x, {"56", false, true});
  inference::ModelStatistics stats = Statistics("gru_stream");
  EXPECT_EQ(stats.inference_stats().fail().count(), static_cast<uint64_t>(refused));
  EXPECT_EQ(stats.inference_stats().success().count(), 6u);
}

TEST_F(SequenceTest, AnIdleSequenceTimesOutWithAnInfoLineAndIsRefusedAsTimedOut) {
  fs::path log =
      fs::temp_directory_path() / ("manypy_sequence_" + std::to_string(getpid()) + ".log");
  server_.set_stderr_path(log.string());
  Start({"--model-config=gru_stream:max_sequence_idle_microseconds=200000"});
  std::vector<float> x = Frames(4, 4);
  std::vector<float> fresh = Whole(x, "900");
  Run(x, {"9", true});
  Run(x, {"tick", true});
  // Past its limit (plus the watchdog's lateness: up to ~100 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  grpc::Status g = Refused(x, {"9"});
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(g.error_message().find("sequence 9 of model 'gru_stream' timed out"), std::string::npos)
      << g.error_message();
  testing::HttpReply h = Http(x, {"tick"});
  EXPECT_EQ(h.status, 400) << h.body;
  EXPECT_NE(h.body.find("sequence 'tick' of model 'gru_stream' timed out"), std::string::npos)
      << h.body;
  EXPECT_NE(h.body.find("max_sequence_idle_microseconds 200000"), std::string::npos) << h.body;
  // Started again, it begins from a zero state: the old one was dropped.
  ExpectNear(Run(x, {"9", true, true}), fresh);
  EXPECT_EQ(Statistics("gru_stream").inference_stats().fail().count(), 2u);

  std::ifstream in(log);
  std::stringstream lines;
  lines << in.rdbuf();
  EXPECT_NE(lines.str().find("INFO model 'gru_stream' version 1: sequence 9 timed out after"),
            std::string::npos)
      << lines.str().substr(0, 4000);
  EXPECT_NE(lines.str().find("sequence 'tick' timed out"), std::string::npos);
  fs::remove(log);
}

TEST_F(SequenceTest, ModelConfigReportsTheSequenceBatcherAndItCanBeTurnedOff) {
  Start();
  grpc::ClientContext ctx;
  inference::ModelConfigRequest request;
  request.set_name("gru_stream");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&ctx, request, &config).ok());
  ASSERT_TRUE(config.config().has_sequence_batching()) << config.DebugString();
  EXPECT_EQ(config.config().sequence_batching().max_sequence_idle_microseconds(), 5000000u);
  EXPECT_TRUE(config.config().sequence_batching().has_direct());
  testing::HttpConnection http(server_.http_port());
  testing::HttpReply reply = http.Send("GET", "/v2/models/gru_stream/config");
  EXPECT_NE(reply.body.find("\"sequence_batching\""), std::string::npos) << reply.body;
}

TEST_F(SequenceTest, WithoutSequenceBatchingEachRequestStandsAlone) {
  Start({"--model-config=gru_stream:sequence_batching=false"});
  std::vector<float> x = Frames(5, 5);
  std::vector<float> first = Run(x, {});
  ASSERT_EQ(first.size(), 5u * kHidden);
  // manypy.request.state is None: no state carries over, sequence parameters or not.
  ExpectNear(Run(x, {"1", true}), first);
  ExpectNear(Run(x, {"1"}), first);
}

}  // namespace
}  // namespace manypy
