// StreamingTest: streaming (generator) models against the real manypy-server
// process: gRPC ModelStreamInfer with Triton's decoupled final flag, HTTP
// /generate and /generate_stream (server-sent events), a model that fails
// mid-stream, a wrong yielded value, a client that leaves (the generator is
// closed at its yield within 0.1 s and the interpreter serves on), and a
// reader that stalls (the server holds a bounded number of responses, then
// ends the stream at the model's execution limit).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/test_util/http_client.h"
#include "tests/test_util/resident_size.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using Stream = grpc::ClientReaderWriter<ModelInferRequest, inference::ModelStreamInferResponse>;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

void AddInt(ModelInferRequest* r, const std::string& name, int64_t value) {
  auto* in = r->add_inputs();
  in->set_name(name);
  in->set_datatype("INT64");
  in->add_shape(1);
  r->add_raw_input_contents(Raw(std::vector<int64_t>{value}));
}

/// ticker's request: `count` responses, `delay_ms` apart, `size` floats each,
/// noting what it does in `marker` (a file; empty: none).
ModelInferRequest Ticker(int64_t count, int64_t delay_ms, int64_t size, const std::string& marker,
                         bool empty_final = true) {
  ModelInferRequest r;
  r.set_model_name("ticker");
  r.set_id("tick");
  AddInt(&r, "COUNT", count);
  AddInt(&r, "DELAY_MS", delay_ms);
  AddInt(&r, "SIZE", size);
  auto* m = r.add_inputs();
  m->set_name("MARKER");
  m->set_datatype("BYTES");
  m->add_shape(1);
  std::string raw(4, '\0');
  uint32_t n = static_cast<uint32_t>(marker.size());
  memcpy(raw.data(), &n, 4);
  r.add_raw_input_contents(raw + marker);
  if (empty_final) (*r.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  return r;
}

/// Whether the response carries triton_final_response, and its value.
bool Final(const inference::ModelStreamInferResponse& r) {
  auto it = r.infer_response().parameters().find("triton_final_response");
  EXPECT_NE(it, r.infer_response().parameters().end()) << r.DebugString();
  return it != r.infer_response().parameters().end() && it->second.bool_param();
}

int64_t Index(const inference::ModelStreamInferResponse& r) {
  return FromRaw<int64_t>(r.infer_response().raw_output_contents(0)).at(0);
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int Count(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class StreamingTest : public ServerTest {
 protected:
  void SetUp() override {
    marker_ = fs::temp_directory_path() / ("manypy_stream_" + std::to_string(getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove(marker_);
  }
  void TearDown() override {
    ServerTest::TearDown();
    fs::remove(marker_);
  }
  void Start(std::vector<std::string> args = {}) {
    args.push_back(std::string("--model-repository=") + MANYPY_TEST_REPOSITORY + "/streaming");
    StartServer(std::move(args));
  }
  std::unique_ptr<Stream> Open(grpc::ClientContext* ctx) { return stub_->ModelStreamInfer(ctx); }

  /// Reads until the stream's empty final response (or an error): the rest.
  std::vector<inference::ModelStreamInferResponse> ReadRequest(Stream& s) {
    std::vector<inference::ModelStreamInferResponse> got;
    inference::ModelStreamInferResponse r;
    while (s.Read(&r)) {
      got.push_back(r);
      if (!r.error_message().empty() || Final(r)) break;
    }
    return got;
  }

  testing::HttpReply Http(const std::string& target, const std::string& body) {
    testing::HttpConnection connection(server_.http_port());
    return connection.Send("POST", target, body);
  }

  fs::path marker_;
};

TEST_F(StreamingTest, EachYieldIsOneResponseInOrderThenTheEmptyFinalResponse) {
  Start();
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(Ticker(5, 0, 2, "")));
  auto got = ReadRequest(*s);
  ASSERT_EQ(got.size(), 6u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(got[i].error_message().empty()) << got[i].error_message();
    EXPECT_EQ(Index(got[i]), i);
    EXPECT_FALSE(Final(got[i]));
    EXPECT_EQ(got[i].infer_response().id(), "tick");
    EXPECT_EQ(FromRaw<float>(got[i].infer_response().raw_output_contents(1)), (std::vector<float>{0, 0}));
  }
  EXPECT_TRUE(Final(got[5]));
  EXPECT_EQ(got[5].infer_response().outputs_size(), 0);
  EXPECT_EQ(got[5].infer_response().model_name(), "ticker");
  // Without triton_enable_empty_final_response, the responses alone. Two
  // requests run at once on the two interpreters: each one's responses are in
  // order, the two interleave.
  ModelInferRequest a = Ticker(2, 0, 1, "", false), b = Ticker(1, 0, 1, "");
  a.set_id("a");
  b.set_id("b");
  ASSERT_TRUE(s->Write(a));
  ASSERT_TRUE(s->Write(b));
  std::vector<int64_t> of_a, of_b;
  bool b_final = false;
  inference::ModelStreamInferResponse r;
  while ((of_a.size() < 2 || !b_final) && s->Read(&r)) {
    ASSERT_TRUE(r.error_message().empty()) << r.error_message();
    if (r.infer_response().id() == "a") {
      EXPECT_FALSE(Final(r));
      of_a.push_back(Index(r));
    } else if (Final(r)) {
      b_final = true;
    } else {
      of_b.push_back(Index(r));
    }
  }
  EXPECT_EQ(of_a, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(of_b, (std::vector<int64_t>{0}));
  EXPECT_TRUE(b_final);
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  // One request each, counted once as a success (the second, which sent no
  // final response, may be counted just after the third's final response).
  uint64_t successes = 0;
  for (auto until = Clock::now() + 5s; Clock::now() < until && successes < 3; std::this_thread::sleep_for(10ms)) {
    successes = Statistics("ticker").inference_stats().success().count();
  }
  EXPECT_EQ(successes, 3u);
}

TEST_F(StreamingTest, ConfigSaysDecoupledAndUnaryInferIsRefusedNamingTheWaysToCallIt) {
  Start();
  grpc::ClientContext cctx;
  inference::ModelConfigRequest creq;
  creq.set_name("ticker");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(stub_->ModelConfig(&cctx, creq, &config).ok());
  EXPECT_TRUE(config.config().model_transaction_policy().decoupled());

  ModelInferResponse out;
  grpc::Status st = Infer(Ticker(1, 0, 1, ""), &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(st.error_message(), "ModelStreamInfer")) << st.error_message();
  EXPECT_TRUE(Contains(st.error_message(), "/v2/models/ticker/generate_stream")) << st.error_message();
  testing::HttpReply reply = Http("/v2/models/raises_after_three/infer",
                                  R"({"inputs":[{"name":"INPUT__0","datatype":"FP32","shape":[1],"data":[1]}]})");
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_TRUE(Contains(reply.body, "generate_stream")) << reply.body;
}

TEST_F(StreamingTest, AGeneratorThatRaisesAfterThreeResponsesEndsWithItsErrorAndTheStreamServesOn) {
  Start();
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(FloatRequest("raises_after_three", {2.f})));
  auto got = ReadRequest(*s);
  ASSERT_EQ(got.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(FromRaw<float>(got[i].infer_response().raw_output_contents(0)),
              (std::vector<float>{2.f * (i + 1)}));
  }
  EXPECT_TRUE(Contains(got[3].error_message(), "ValueError: the fourth response cannot be made"))
      << got[3].error_message();
  EXPECT_TRUE(Contains(got[3].error_message(), "streaming_models.py")) << got[3].error_message();
  EXPECT_EQ(got[3].infer_response().model_name(), "raises_after_three");
  // The same stream and interpreter serve the next request.
  ASSERT_TRUE(s->Write(Ticker(2, 0, 1, "")));
  got = ReadRequest(*s);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_TRUE(Final(got[2]));
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  EXPECT_EQ(Statistics("raises_after_three").inference_stats().fail().count(), 1u);
}

TEST_F(StreamingTest, AYieldedValueOfTheWrongTypeEndsTheStreamNamingTheOutput) {
  Start();
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(FloatRequest("wrong_type", {1.f})));
  auto got = ReadRequest(*s);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[0].error_message().empty());
  EXPECT_TRUE(Contains(got[1].error_message(), "OUTPUT__0")) << got[1].error_message();
  EXPECT_TRUE(Contains(got[1].error_message(), "INTERNAL")) << got[1].error_message();
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
}

TEST_F(StreamingTest, AClientThatCancelsClosesTheGeneratorAtItsYieldWithinATenthOfASecond) {
  Start({"--interpreters=1"});
  {
    grpc::ClientContext ctx;
    auto s = Open(&ctx);
    ASSERT_TRUE(s->Write(Ticker(100000, 10, 1, marker_.string())));
    inference::ModelStreamInferResponse r;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->Read(&r));
    double cancelled_at = WallSeconds();
    ctx.TryCancel();
    std::string text;
    for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(5ms)) {
      text = ReadFile(marker_);
      if (Contains(text, "closed ")) break;
    }
    ASSERT_TRUE(Contains(text, "closed ")) << text;
    double closed_at = std::stod(text.substr(text.find("closed ") + 7));
    EXPECT_LT(closed_at - cancelled_at, 0.1) << text;
    s->Finish();
  }
  // The one interpreter serves the next request.
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  ASSERT_TRUE(s->Write(Ticker(2, 0, 1, "")));
  EXPECT_EQ(ReadRequest(*s).size(), 3u);
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  EXPECT_EQ(Statistics("ticker").inference_stats().cancel().count(), 1u);
}

TEST_F(StreamingTest, AReaderThatStallsHoldsABoundedNumberOfResponsesThenTheStreamEndsAtTheLimit) {
  // Three interpreters: two for the stalled streams, one for everybody else.
  Start({"--model-config=ticker:max_execution_seconds=2", "--interpreters=3"});
  const double baseline_mib = testing::ResidentBytes(server_.serving_pid()) / 1048576.0;
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  // 1 MiB responses: gRPC's flow control soon stops taking them.
  ASSERT_TRUE(s->Write(Ticker(1000, 0, 256 * 1024, marker_.string())));
  // A second stalled reader, on a connection of its own.
  const fs::path other_marker = marker_.string() + "_other";
  grpc::ChannelArguments own_connection;
  own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto other = GRPCInferenceService::NewStub(
      grpc::CreateCustomChannel(server_.address(), grpc::InsecureChannelCredentials(), own_connection));
  grpc::ClientContext other_ctx;
  auto stalled = other->ModelStreamInfer(&other_ctx);
  ASSERT_TRUE(stalled->Write(Ticker(1000, 0, 256 * 1024, other_marker.string())));
  std::this_thread::sleep_for(1500ms);
  int yielded = Count(ReadFile(marker_), "yielded ");
  // The window's 8, one in gRPC's hands, one waiting for room, and what the
  // transport buffers.
  EXPECT_LE(yielded, 14) << "the server went on taking responses from a model nobody reads";
  EXPECT_GE(yielded, 8);
  EXPECT_LE(Count(ReadFile(other_marker), "yielded "), 14);
  // What the two hold, and a client of the third interpreter served meanwhile.
  const double per_stream_mib =
      (testing::ResidentBytes(server_.serving_pid()) / 1048576.0 - baseline_mib) / 2;
  const Clock::time_point asked = Clock::now();
  {
    grpc::ClientContext served_ctx;
    auto served = Open(&served_ctx);
    ASSERT_TRUE(served->Write(Ticker(2, 0, 1, "")));
    EXPECT_EQ(ReadRequest(*served).size(), 3u);
    served->WritesDone();
    EXPECT_TRUE(served->Finish().ok());
  }
  const double served_s = std::chrono::duration<double>(Clock::now() - asked).count();
  printf("[ stall    ] 2 readers stalled on 1 MiB responses: %d and %d yielded, %.1f MiB resident "
         "each; another client answered in %.3f s\n",
         yielded, Count(ReadFile(other_marker), "yielded "), per_stream_mib, served_s);
  EXPECT_LT(per_stream_mib, 32);
  EXPECT_LT(served_s, 1.0);
  std::this_thread::sleep_for(2000ms);  // past the limit: the stream has been ended
  int after = Count(ReadFile(marker_), "yielded ");
  EXPECT_LE(after, yielded + 1);
  auto got = ReadRequest(*s);
  ASSERT_FALSE(got.empty());
  const std::string& error = got.back().error_message();
  EXPECT_TRUE(Contains(error, "DEADLINE_EXCEEDED")) << error;
  EXPECT_TRUE(Contains(error, "execution limit")) << error;
  EXPECT_TRUE(Contains(ReadFile(marker_), "closed ")) << "the generator was not closed";
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
  other_ctx.TryCancel();
  stalled->Finish();
  fs::remove(other_marker);
}

TEST_F(StreamingTest, TheExecutionLimitBoundsEachResponseNotTheWholeStream) {
  Start({"--model-config=ticker:max_execution_seconds=1"});
  grpc::ClientContext ctx;
  auto s = Open(&ctx);
  // 2.4 s in all, 0.2 s per response: within the limit.
  ASSERT_TRUE(s->Write(Ticker(12, 200, 1, "")));
  auto got = ReadRequest(*s);
  ASSERT_EQ(got.size(), 13u) << (got.empty() ? "" : got.back().error_message());
  EXPECT_TRUE(Final(got.back()));
  // One step of 1.5 s: interrupted, saying so.
  ASSERT_TRUE(s->Write(Ticker(3, 1500, 1, "")));
  got = ReadRequest(*s);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(Contains(got[1].error_message(), "took longer than its execution limit of 1 s to "
                                                "yield its next response"))
      << got[1].error_message();
  s->WritesDone();
  EXPECT_TRUE(s->Finish().ok());
}

TEST_F(StreamingTest, HttpGenerateStreamSendsOneServerSentEventPerResponse) {
  Start();
  testing::HttpReply reply = Http("/v2/models/ticker/generate_stream",
                                  R"({"COUNT": 3, "DELAY_MS": 0, "SIZE": 1, "MARKER": "", "id": "g1"})");
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(Count(reply.body, "data: "), 3) << reply.body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(Contains(reply.body, "data: {\"model_name\":\"ticker\",\"model_version\":\"1\",\"id\":\"g1\","
                                     "\"INDEX\":" + std::to_string(i) + ",\"DATA\":0.0}\n\n"))
        << reply.body;
  }
  // An error mid-stream is the last event.
  reply = Http("/v2/models/raises_after_three/generate_stream", R"({"INPUT__0": [1.5]})");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(Count(reply.body, "data: "), 4) << reply.body;
  EXPECT_TRUE(Contains(reply.body, "data: {\"error\":\"model 'raises_after_three' raised ValueError"))
      << reply.body;
  // /generate wants exactly one response.
  reply = Http("/v2/models/ticker/generate", R"({"COUNT": 1, "DELAY_MS": 0, "SIZE": 2, "MARKER": ""})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_TRUE(Contains(reply.body, "\"INDEX\":0,\"DATA\":[0.0,0.0]")) << reply.body;
  reply = Http("/v2/models/ticker/generate", R"({"COUNT": 2, "DELAY_MS": 0, "SIZE": 2, "MARKER": ""})");
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_TRUE(Contains(reply.body, "generate_stream")) << reply.body;
  // A field that is no input is named, with the inputs.
  reply = Http("/v2/models/ticker/generate_stream", R"({"COUNTS": 1})");
  EXPECT_EQ(reply.status, 400) << reply.body;
  EXPECT_TRUE(Contains(reply.body, "'COUNTS' is not an input of model 'ticker'")) << reply.body;
}

TEST_F(StreamingTest, AnHttpClientThatDisconnectsClosesTheGenerator) {
  Start({"--interpreters=1"});
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::socket socket(io);
  socket.connect({net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_.http_port())});
  std::string body = R"({"COUNT": 100000, "DELAY_MS": 10, "SIZE": 1, "MARKER": ")" + marker_.string() + "\"}";
  std::string request = "POST /v2/models/ticker/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
  net::write(socket, net::buffer(request));
  std::string seen;
  char chunk[4096];
  while (Count(seen, "data: ") < 3) {
    size_t n = socket.read_some(net::buffer(chunk));
    seen.append(chunk, n);
  }
  EXPECT_TRUE(Contains(seen, "Content-Type: text/event-stream")) << seen;
  socket.close();
  std::string text;
  for (auto until = Clock::now() + 5s; Clock::now() < until; std::this_thread::sleep_for(5ms)) {
    text = ReadFile(marker_);
    if (Contains(text, "closed ")) break;
  }
  EXPECT_TRUE(Contains(text, "closed ")) << text;
  // And the interpreter serves on.
  testing::HttpReply reply =
      Http("/v2/models/ticker/generate", R"({"COUNT": 1, "DELAY_MS": 0, "SIZE": 1, "MARKER": ""})");
  EXPECT_EQ(reply.status, 200) << reply.body;
}

}  // namespace
}  // namespace manypy
