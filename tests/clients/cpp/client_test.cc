// InferenceClient against the real manypy-server: every call, its results
// and the status codes its errors carry.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "clients/cpp/bearer_token.h"
#include "clients/cpp/grpc_status.h"
#include "clients/cpp/inference_client.h"
#include "tests/test_util/server_process.h"

namespace manypy::client {
namespace {

// The value of `s`, failing the test (and throwing) when it is an error.
template <typename T>
T V(StatusOr<T> s) {
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

class ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->Start(MANYPY_SERVER_BINARY,
                               {"--model-control-mode=explicit", "--load-model=two_io",
                                "--load-model=failing", "--load-model=echo_all", "--interpreters=2",
                                std::string("--model-repository=") + MANYPY_TEST_REPOSITORY}))
        << "server did not start";
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(server_->Stop(), 0);
    delete server_;
  }
  void SetUp() override {
    auto c = InferenceClient::Create(server_->address());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    client_ = std::move(c).value();
  }
  static InferInputs TwoIoInputs() {
    return {InferInput::FromVector<float>("INPUT_A", {1, 2, 3, 4}),
            InferInput::FromVector<int64_t>("INPUT_B", {10, 20, 30, 40})};
  }

  static testing::ServerProcess* server_;
  std::unique_ptr<InferenceClient> client_;
};
testing::ServerProcess* ClientTest::server_ = nullptr;

// The client reads a token file as the server reads its own (one reader,
// common/token_file.h): what one accepts the other does.
TEST(BearerTokenTest, ReadsATokenFileAsTheServerDoesNamingTheFlag) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("manypy_bearer_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return (dir / name).string();
  };
  auto good = ReadBearerTokenFile(write("good", "  s3cr3t-Token_1\r\n"));
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(*good, "s3cr3t-Token_1");
  EXPECT_EQ(BearerAuthorization(*good), "Bearer s3cr3t-Token_1");
  auto two = ReadBearerTokenFile(write("two", "first second\n"));
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("--auth-token-file: the token file"), std::string::npos)
      << two.status().message();
  EXPECT_EQ(two.status().message().find("first"), std::string::npos);  // never the token
  auto missing = ReadBearerTokenFile((dir / "nope").string(), "management-token-file");
  EXPECT_NE(missing.status().message().find("--management-token-file: cannot read"),
            std::string::npos)
      << missing.status().message();
  fs::remove_all(dir);
}

TEST_F(ClientTest, CreateRejectsBadArguments) {
  EXPECT_EQ(InferenceClient::Create("").status().code(), StatusCode::kInvalidArgument);
  InferenceClient::Options o;
  o.max_message_size = 0;
  EXPECT_EQ(InferenceClient::Create("x:1", o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, HealthAndMetadata) {
  EXPECT_TRUE(V(client_->ServerLive()));
  EXPECT_TRUE(V(client_->ServerReady()));
  EXPECT_TRUE(V(client_->ModelReady("two_io")));
  EXPECT_FALSE(V(client_->ModelReady("resnet18")));
  EXPECT_EQ(V(client_->Health()), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(client_->Health("no.such.Service").status().code(), StatusCode::kNotFound);
  auto server = client_->ServerMetadata();
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(server->name(), "manypy");
  auto meta = client_->ModelMetadata("two_io");
  ASSERT_TRUE(meta.ok()) << meta.status().ToString();
  ASSERT_EQ(meta->inputs_size(), 2);
  EXPECT_EQ(meta->inputs(1).name(), "INPUT_B");
  EXPECT_EQ(meta->inputs(1).datatype(), "INT64");
  auto missing = client_->ModelMetadata("no_such_model");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no_such_model"), std::string::npos);
  auto config = client_->ModelConfig("two_io");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->config().input_size(), 2);
}

TEST_F(ClientTest, InferRawAndTyped) {
  for (bool raw_inputs : {true, false}) {
    InferOptions o;
    o.model_name = "two_io";
    o.request_id = "r-1";
    o.raw_inputs = raw_inputs;
    auto r = client_->Infer(TwoIoInputs(), o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->id(), "r-1");
    EXPECT_EQ(r->model_version(), "1");
    EXPECT_EQ(r->output_names(), (std::vector<std::string>{"SUM", "PRODUCT"}));
    EXPECT_EQ(V(r->AsFloat("SUM")), (std::vector<float>{11, 22, 33, 44}));
    EXPECT_EQ(V(r->AsFloat("PRODUCT")), (std::vector<float>{10, 40, 90, 160}));
    EXPECT_EQ(r->Output("SUM")->shape, (std::vector<int64_t>{4}));
    EXPECT_EQ(r->AsInt64("SUM").status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r->AsFloat("NOPE").status().code(), StatusCode::kNotFound);
  }
  InferOptions o;
  o.model_name = "two_io";
  o.requested_outputs = {"PRODUCT"};
  o.raw_outputs = false;  // typed contents come back and are converted to raw
  auto r = client_->Infer(TwoIoInputs(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->output_names(), (std::vector<std::string>{"PRODUCT"}));
  EXPECT_EQ(V(r->AsFloat("PRODUCT")), (std::vector<float>{10, 40, 90, 160}));
}

TEST_F(ClientTest, EchoEveryDatatype) {
  InferInputs in = {
      InferInput::FromVector<bool>("IN_BOOL", {true, false}),
      InferInput::FromVector<uint8_t>("IN_UINT8", {1, 255}),
      InferInput::FromVector<uint16_t>("IN_UINT16", {1, 2}),
      InferInput::FromVector<uint32_t>("IN_UINT32", {1, 2}),
      InferInput::FromVector<uint64_t>("IN_UINT64", {1, 2}),
      InferInput::FromVector<int8_t>("IN_INT8", {-1, 2}),
      InferInput::FromVector<int16_t>("IN_INT16", {-1, 2}),
      InferInput::FromVector<int32_t>("IN_INT32", {-1, 2}),
      InferInput::FromVector<int64_t>("IN_INT64", {-1, 2}),
      InferInput::FromRaw("IN_FP16", "FP16", {2}, std::string("\x00\x3c\x00\xc0", 4)),
      InferInput::FromRaw("IN_BF16", "BF16", {2}, std::string("\x80\x3f\x00\xc0", 4)),
      InferInput::FromVector<float>("IN_FP32", {1.5f, -2}),
      InferInput::FromVector<double>("IN_FP64", {1.5, -2}),
      InferInput::FromStrings("IN_BYTES", {"hello", std::string("\0x", 2)}),
  };
  InferOptions o;
  o.model_name = "echo_all";
  auto r = client_->Infer(in, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& i : in) {
    std::string out = "OUT_" + i.name.substr(3);
    ASSERT_TRUE(r->Has(out)) << out;
    EXPECT_EQ(r->Output(out)->datatype, i.datatype);
    EXPECT_EQ(r->Output(out)->raw, i.raw) << out;
  }
  EXPECT_EQ(V(r->As<bool>("OUT_BOOL")), (std::vector<bool>{true, false}));
  EXPECT_EQ(V(r->As<int8_t>("OUT_INT8")), (std::vector<int8_t>{-1, 2}));
  EXPECT_EQ(V(r->AsStrings("OUT_BYTES")), (std::vector<std::string>{"hello", std::string("\0x", 2)}));
  // FP16 has no typed field: refused before anything is sent.
  o.raw_inputs = false;
  EXPECT_EQ(client_->Infer(in, o).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(ClientTest, ErrorsCarryTheServersCodeAndMessage) {
  InferOptions o;
  o.model_name = "failing";
  auto r = client_->Infer({InferInput::FromVector<float>("INPUT__0", {1, -1})}, o);
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_NE(r.status().message().find("ValueError"), std::string::npos) << r.status().message();
  EXPECT_TRUE(client_->Infer({InferInput::FromVector<float>("INPUT__0", {1, 2})}, o).ok());
  o.model_name = "no_such_model";
  EXPECT_EQ(client_->Infer(TwoIoInputs(), o).status().code(), StatusCode::kNotFound);
  o.model_name = "two_io";
  EXPECT_EQ(client_->Infer({TwoIoInputs()[0]}, o).status().code(), StatusCode::kInvalidArgument);
  // Nobody listens there: UNAVAILABLE.
  InferenceClient::Options short_timeout;
  short_timeout.default_timeout = std::chrono::milliseconds(2000);
  auto nowhere = InferenceClient::Create("127.0.0.1:1", short_timeout);
  ASSERT_TRUE(nowhere.ok());
  EXPECT_EQ((*nowhere)->ServerLive().status().code(), StatusCode::kUnavailable);
}

TEST_F(ClientTest, RepositoryLoadUnloadAndStatistics) {
  auto index = client_->RepositoryIndex();
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  bool saw_two_io = false;
  for (const auto& m : index->models()) saw_two_io |= m.name() == "two_io" && m.state() == "READY";
  EXPECT_TRUE(saw_two_io);
  InferOptions o;
  o.model_name = "two_io";
  ASSERT_TRUE(client_->Infer(TwoIoInputs(), o).ok());
  auto stats = client_->ModelStatistics("two_io");
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ(stats->model_stats_size(), 1);
  EXPECT_GE(stats->model_stats(0).inference_stats().success().count(), 1u);

  ASSERT_TRUE(client_->UnloadModel("two_io").ok());
  EXPECT_FALSE(V(client_->ModelReady("two_io")));
  EXPECT_EQ(client_->Infer(TwoIoInputs(), o).status().code(), StatusCode::kUnavailable);
  Status load = client_->LoadModel("two_io");
  ASSERT_TRUE(load.ok()) << load.ToString();
  EXPECT_TRUE(V(client_->ModelReady("two_io")));
  EXPECT_EQ(client_->LoadModel("no_such_model").code(), StatusCode::kNotFound);
}

TEST_F(ClientTest, OneClientServesManyThreads) {
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      InferOptions o;
      o.model_name = "two_io";
      for (int i = 0; i < 20; ++i) ok += client_->Infer(TwoIoInputs(), o).ok();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 160);
}

// A port that nothing listens on: bound, then closed (connects are refused).
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(a);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length), 0);
  close(fd);
  return ntohs(a.sin_port);
}

TEST_F(ClientTest, WaitForConnectionConnectsNowOrSaysWhereItCouldNot) {
  EXPECT_TRUE(client_->WaitForConnection(std::chrono::seconds(10)).ok());
  EXPECT_TRUE(V(client_->ServerLive()));

  std::string closed = "127.0.0.1:" + std::to_string(ClosedPort());
  auto c = InferenceClient::Create(closed);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto start = std::chrono::steady_clock::now();
  Status s = (*c)->WaitForConnection(std::chrono::milliseconds(300));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(290));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "could not connect to " + closed + " within 300 ms");
}

TEST(GrpcStatusTest, MapsCodesAndKeepsTheOriginalName) {
  Status s = FromGrpcStatus(grpc::Status(grpc::StatusCode::UNKNOWN, "boom"));
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "UNKNOWN: boom");
  s = FromGrpcStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad");
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::CANCELLED, "")).code(),
            StatusCode::kUnavailable);
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace manypy::client
