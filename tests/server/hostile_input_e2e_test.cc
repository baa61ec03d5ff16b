// HostileInputTest: bodies built to break decoders, against the real
// manypy-server while a client keeps inferring beside them. Every HTTP route
// that reads JSON gets a million levels of nesting (arrays and objects) and
// answers 400 naming the depth limit; a gRPC message of a million nested
// groups is refused by protobuf's recursion limit; refused inference
// requests are counted once each; the server serves on with nothing in flight
// lost.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

constexpr size_t kLevels = 1000 * 1000;
constexpr const char* kDepthRefusal = "nested deeper than the limit of 100 levels";

std::string DeepArrays() { return "{\"x\":" + std::string(kLevels, '[') + std::string(kLevels, ']') + "}"; }

std::string DeepObjects() {
  std::string s = "{\"x\":";
  s.reserve(kLevels * 6 + 8);
  for (size_t i = 0; i < kLevels; ++i) s += "{\"a\":";
  s += "1";
  s.append(kLevels + 1, '}');
  return s;
}

class HostileInputTest : public ServerTest {
 protected:
  uint64_t Failures(const std::string& model) {
    return Statistics(model).inference_stats().fail().count();
  }
};

TEST_F(HostileInputTest, EveryJsonRouteRefusesAMillionLevelsAndTheServerServesOn) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io"});
  // Requests in flight the whole time: none may be lost.
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::thread beside([&] {
    while (!stop.load()) {
      ModelInferResponse out;
      (Infer(TwoIoRequest(true), &out).ok() ? ok : failed)++;
    }
  });
  const uint64_t failures_before = Failures("two_io");
  const std::vector<std::string> routes = {
      "/v2/models/two_io/infer",
      "/v2/models/two_io/generate",
      "/v2/models/two_io/generate_stream",
      "/v1/completions",
      "/v1/chat/completions",
      "/v1/embeddings",
      "/v2/repository/models/two_io/load",
      "/v2/systemsharedmemory/region/r/register",
      "/v2/cudasharedmemory/region/r/register",
  };
  int two_io_refusals = 0;
  for (const std::string& body : {DeepArrays(), DeepObjects()}) {
    for (const std::string& route : routes) {
      testing::HttpConnection connection(server_.http_port());
      testing::HttpReply reply = connection.Send("POST", route, body);
      EXPECT_EQ(reply.status, 400) << route << ": " << reply.body.substr(0, 300);
      EXPECT_NE(reply.body.find(kDepthRefusal), std::string::npos) << route << ": " << reply.body;
      if (route.rfind("/v2/models/two_io/", 0) == 0) ++two_io_refusals;
      // The same connection goes on serving.
      EXPECT_EQ(connection.Send("GET", "/v2/health/ready").status, 200) << route;
    }
    // The repository index reads an optional filter: a deep one is no filter.
    testing::HttpConnection connection(server_.http_port());
    EXPECT_EQ(connection.Send("POST", "/v2/repository/index", body).status, 200);
  }
  EXPECT_EQ(Failures("two_io") - failures_before, static_cast<uint64_t>(two_io_refusals));

  // gRPC: a ModelInferRequest whose unknown field 15 nests a million groups
  // (start-group tags, then their end tags): protobuf stops at its limit.
  std::string nested;
  nested.reserve(kLevels * 2);
  nested.append(kLevels, static_cast<char>((15 << 3) | 3));  // field 15, start group
  nested.append(kLevels, static_cast<char>((15 << 3) | 4));  // field 15, end group
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::Slice slice(nested);
  grpc::ByteBuffer request(&slice, 1), response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/inference.GRPCInferenceService/ModelInfer", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) { done.set_value(s); });
  grpc::Status s = done.get_future().get();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("100"), std::string::npos) << s.error_message();

  stop = true;
  beside.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 0);
  ModelInferResponse out;
  EXPECT_TRUE(Infer(TwoIoRequest(true), &out).ok());
  printf("[ hostile  ] %d inferences beside the deep bodies, %d failed\n", ok.load(), failed.load());
}

}  // namespace
}  // namespace manypy
