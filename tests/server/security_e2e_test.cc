// End-to-end security (SECURITY.md) over both protocols against the real
// manypy-server: bearer tokens (inference and management), management off
// outside explicit mode, name-only loading, every size limit refused cleanly
// with the server serving on, and the metrics endpoint on its own address.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <sys/wait.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "clients/cpp/inference_client.h"
#include "proto/health.grpc.pb.h"
#include "tests/test_util/http_client.h"
#include "tests/test_util/server_fixture.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
namespace http = boost::beast::http;
using testing::HttpConnection;

constexpr const char* kInferenceToken = "infer-7f3a9c2e51d04b8e";
constexpr const char* kManagementToken = "manage-0b91d6e4a7c35f28";

const char* kTwoIoJson = R"({"inputs": [
  {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
  {"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [10, 20, 30, 40]}]})";

struct Reply {
  int status = 0;  // 0: the connection broke
  std::string body;
  std::string www_authenticate;
};

/// One HTTP/1.1 request on its own connection to `host:port`, with an
/// Authorization header when `token` is given.
Reply Send(const std::string& method, const std::string& target, const std::string& body,
           const std::string& token, int port, const std::string& host = "127.0.0.1") {
  boost::asio::io_context io;
  boost::asio::ip::tcp::socket socket(io);
  boost::system::error_code ec;
  socket.connect({boost::asio::ip::make_address(host), static_cast<unsigned short>(port)}, ec);
  Reply reply;
  if (ec) return reply;
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  req.set(http::field::host, host);
  req.set(http::field::content_type, "application/json");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  req.body() = body;
  req.prepare_payload();
  http::write(socket, req, ec);
  if (ec) return reply;
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> res;
  http::read(socket, buffer, res, ec);
  if (ec) return reply;
  reply.status = res.result_int();
  reply.body = res.body();
  if (auto it = res.find(http::field::www_authenticate); it != res.end()) {
    reply.www_authenticate = std::string(it->value());
  }
  return reply;
}

std::string ErrorOf(const Reply& r) {
  rapidjson::Document doc;
  doc.Parse(r.body.data(), r.body.size());
  return !doc.HasParseError() && doc.IsObject() && doc.HasMember("error") ? doc["error"].GetString() : "";
}

class SecurityTest : public ServerTest {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("manypy_security_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    std::ofstream(dir_ / "inference.token") << kInferenceToken << "\n";
    std::ofstream(dir_ / "management.token") << "  " << kManagementToken << "\r\n";
  }
  void TearDown() override {
    ServerTest::TearDown();
    fs::remove_all(dir_);
  }
  std::vector<std::string> TokenFlags() const {
    return {"--auth-token-file=" + (dir_ / "inference.token").string(),
            "--management-token-file=" + (dir_ / "management.token").string()};
  }
  int http_port() const { return server_.http_port(); }

  /// A gRPC call's context carrying `token` (none when empty).
  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
  }
  grpc::Status InferWith(const std::string& token) {
    ModelInferResponse out;
    return stub_->ModelInfer(Ctx(token).get(), TwoIoRequest(true), &out);
  }
  grpc::Status LoadWith(const std::string& token, const std::string& name,
                        const std::string& parameter = "") {
    inference::RepositoryModelLoadRequest load;
    load.set_model_name(name);
    if (!parameter.empty()) (*load.mutable_parameters())[parameter].set_string_param("x");
    inference::RepositoryModelLoadResponse loaded;
    return stub_->RepositoryModelLoad(Ctx(token).get(), load, &loaded);
  }

  fs::path dir_;
};

TEST_F(SecurityTest, TokensGuardGrpcAndProbesStayOpen) {
  StartServer([&] {
    auto args = TokenFlags();
    args.insert(args.end(), {"--model-control-mode=explicit", "--load-model=two_io", "--no-metrics"});
    return args;
  }());
  // Probes: no token.
  inference::ServerLiveResponse live;
  EXPECT_TRUE(stub_->ServerLive(Ctx("").get(), {}, &live).ok());
  EXPECT_TRUE(live.live());
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse serving;
  EXPECT_TRUE(health->Check(Ctx("").get(), {}, &serving).ok());
  EXPECT_EQ(serving.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  grpc::Status s = InferWith("");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("authorization: Bearer"), std::string::npos) << s.error_message();
  s = InferWith("not-the-token");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(s.error_message().find(kInferenceToken), std::string::npos);
  EXPECT_TRUE(InferWith(kInferenceToken).ok());
  EXPECT_TRUE(InferWith(kManagementToken).ok());
  inference::ModelMetadataRequest meta_request;
  meta_request.set_name("two_io");
  inference::ModelMetadataResponse meta;
  EXPECT_EQ(stub_->ModelMetadata(Ctx("").get(), meta_request, &meta).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(stub_->ModelMetadata(Ctx(kInferenceToken).get(), meta_request, &meta).ok());

  {  // A stream without a token ends at once.
    auto ctx = Ctx("");
    auto stream = stub_->ModelStreamInfer(ctx.get());
    stream->Write(TwoIoRequest(true));
    stream->WritesDone();
    inference::ModelStreamInferResponse ignored;
    EXPECT_FALSE(stream->Read(&ignored));
    EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {  // With one it serves.
    auto ctx = Ctx(kInferenceToken);
    auto stream = stub_->ModelStreamInfer(ctx.get());
    ASSERT_TRUE(stream->Write(TwoIoRequest(true)));
    stream->WritesDone();
    inference::ModelStreamInferResponse answer;
    ASSERT_TRUE(stream->Read(&answer));
    EXPECT_TRUE(answer.error_message().empty()) << answer.error_message();
    EXPECT_TRUE(stream->Finish().ok());
  }

  // Management: the management token only.
  inference::RepositoryIndexResponse index;
  s = stub_->RepositoryIndex(Ctx(kInferenceToken).get(), {}, &index);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(s.error_message().find("management token"), std::string::npos) << s.error_message();
  EXPECT_EQ(stub_->RepositoryIndex(Ctx("").get(), {}, &index).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(stub_->RepositoryIndex(Ctx(kManagementToken).get(), {}, &index).ok());
  EXPECT_EQ(LoadWith(kInferenceToken, "two_io").error_code(), grpc::StatusCode::PERMISSION_DENIED);

  // Names only: no paths, no files or configuration in the request.
  for (const char* path : {"../two_io", "/tmp/two_io.mpk", "sub/two_io"}) {
    s = LoadWith(kManagementToken, path);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_NE(s.error_message().find("only by name"), std::string::npos) << s.error_message();
  }
  for (const char* parameter : {"config", "file:1/model.py"}) {
    s = LoadWith(kManagementToken, "two_io", parameter);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << parameter;
    EXPECT_NE(s.error_message().find(parameter), std::string::npos) << s.error_message();
  }
  EXPECT_TRUE(LoadWith(kManagementToken, "two_io").ok());
  EXPECT_TRUE(InferWith(kInferenceToken).ok());
}

TEST_F(SecurityTest, TokensGuardHttpWith401And403AndProbesStayOpen) {
  StartServer([&] {
    auto args = TokenFlags();
    args.insert(args.end(), {"--model-control-mode=explicit", "--load-model=two_io", "--no-metrics"});
    return args;
  }());
  const int port = http_port();
  EXPECT_EQ(Send("GET", "/v2/health/live", "", "", port).status, 200);
  EXPECT_EQ(Send("GET", "/v2/health/ready", "", "", port).status, 200);

  Reply r = Send("POST", "/v2/models/two_io/infer", kTwoIoJson, "", port);
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.www_authenticate.rfind("Bearer", 0), 0u) << r.www_authenticate;
  EXPECT_NE(ErrorOf(r).find("Bearer"), std::string::npos) << r.body;
  r = Send("POST", "/v2/models/two_io/infer", kTwoIoJson, "wrong-token", port);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.www_authenticate.find("invalid_token"), std::string::npos) << r.www_authenticate;
  EXPECT_EQ(Send("GET", "/v2/models/two_io", "", "", port).status, 401);
  EXPECT_EQ(Send("GET", "/v2", "", "", port).status, 401);
  EXPECT_EQ(Send("POST", "/v2/models/two_io/infer", kTwoIoJson, kInferenceToken, port).status, 200);
  EXPECT_EQ(Send("GET", "/v2/models/two_io", "", kManagementToken, port).status, 200);

  r = Send("POST", "/v2/repository/index", "{}", kInferenceToken, port);
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.www_authenticate.find("insufficient_scope"), std::string::npos) << r.www_authenticate;
  EXPECT_EQ(Send("POST", "/v2/repository/models/two_io/load", "", kInferenceToken, port).status, 403);
  EXPECT_EQ(Send("POST", "/v2/repository/index", "{}", "", port).status, 401);
  EXPECT_EQ(Send("POST", "/v2/repository/index", "{}", kManagementToken, port).status, 200);

  for (const char* target : {"/v2/repository/models/../load", "/v2/repository/models/..%2Ftwo_io/load"}) {
    r = Send("POST", target, "", kManagementToken, port);
    EXPECT_EQ(r.status, 400) << target;
    EXPECT_NE(ErrorOf(r).find("only by name"), std::string::npos) << r.body;
  }
  for (const char* body : {R"({"parameters": {"config": "{\"backend\": \"python\"}"}})",
                           R"({"parameters": {"file:1/model.py": "aW1wb3J0IG9z"}})"}) {
    r = Send("POST", "/v2/repository/models/two_io/load", body, kManagementToken, port);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(ErrorOf(r).find("only by name"), std::string::npos) << r.body;
  }
  EXPECT_EQ(Send("POST", "/v2/repository/models/two_io/load", "", kManagementToken, port).status, 200);
  EXPECT_EQ(Send("POST", "/v2/models/two_io/infer", kTwoIoJson, kInferenceToken, port).status, 200);
}

TEST_F(SecurityTest, ManagementIsOffOutsideExplicitModeAsInTriton) {
  fs::create_directories(dir_ / "repo");
  fs::copy_file(fs::path(MANYPY_TEST_REPOSITORY) / "two_io.mpk", dir_ / "repo" / "two_io.mpk");
  StartServer({"--model-repository=" + (dir_ / "repo").string(), "--no-metrics"});
  grpc::Status s = LoadWith("", "two_io");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(s.error_message().find("--model-control-mode=explicit"), std::string::npos);
  Reply r = Send("POST", "/v2/repository/models/two_io/unload", "", "", http_port());
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(ErrorOf(r).find("--model-control-mode=explicit"), std::string::npos) << r.body;
  // The index stays readable (as in Triton), and the model serves on.
  inference::RepositoryIndexResponse index;
  EXPECT_TRUE(stub_->RepositoryIndex(Ctx("").get(), {}, &index).ok());
  EXPECT_TRUE(InferWith("").ok());
}

TEST_F(SecurityTest, BadTokenFilesStopTheStartWithAClearMessage) {
  std::ofstream(dir_ / "empty.token") << "\n";
  for (const auto& [flag, expected] :
       std::vector<std::pair<std::string, std::string>>{
           {"--auth-token-file=" + (dir_ / "empty.token").string(), "is empty"},
           {"--management-token-file=" + (dir_ / "missing.token").string(), "cannot read"}}) {
    std::string command = std::string(MANYPY_SERVER_BINARY) + " --no-http --no-metrics " + flag + " 2>&1";
    FILE* out = popen(command.c_str(), "r");
    ASSERT_NE(out, nullptr);
    std::string text;
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof(buf), out)) text.append(buf, n);
    int status = pclose(out);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << text;
    EXPECT_NE(text.find(expected), std::string::npos) << text;
  }
}

TEST_F(SecurityTest, RequestsOverEveryLimitAreRefusedAndTheServerServesOn) {
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--no-metrics",
               "--max-message-size=100000", "--http-max-connections=2",
               "--grpc-max-concurrent-streams=1", "--max-archive-size=1000000"});
  // gRPC message: RESOURCE_EXHAUSTED, then a normal request.
  ModelInferRequest big = TwoIoRequest(true);
  big.mutable_raw_input_contents(0)->append(200000, '\0');
  ModelInferResponse out;
  EXPECT_EQ(Infer(big, &out).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(Infer(TwoIoRequest(true), &out).ok());

  // HTTP body: 413 before it is read, then a normal request.
  {
    HttpConnection c(http_port());
    c.WriteRaw("POST /v2/models/two_io/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 200000\r\n\r\n");
    std::string reply = c.ReadAll();
    EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
    EXPECT_NE(reply.find("--max-message-size"), std::string::npos) << reply;
  }
  // A closed connection's slot frees once the server sees the close: wait for it.
  auto served = [&] {
    for (int i = 0; i < 200; ++i) {
      if (Send("POST", "/v2/models/two_io/infer", kTwoIoJson, "", http_port()).status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(served());

  // HTTP connections: two open, a third is closed without a reply; once one ends, served.
  {
    // Earlier connections' slots free as the server sees them close: retry until served.
    auto open_served = [&] {
      for (int i = 0; i < 200; ++i) {
        auto c = std::make_unique<HttpConnection>(http_port());
        if (c->Send("GET", "/v2/health/live").status == 200) return c;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      return std::unique_ptr<HttpConnection>();
    };
    auto first = open_served(), second = open_served();
    ASSERT_TRUE(first && second);
    HttpConnection third(http_port());
    EXPECT_EQ(third.Send("GET", "/v2/health/live").status, 0);  // closed by the server
    EXPECT_EQ(first->Send("GET", "/v2/health/live").status, 200);  // the open ones serve on
  }
  EXPECT_TRUE(served());

  // gRPC streams per connection: one open stream holds the only slot of its
  // connection; a call on it waits (here until its deadline), another connection serves.
  {
    grpc::ClientContext stream_ctx;
    auto stream = stub_->ModelStreamInfer(&stream_ctx);
    ASSERT_TRUE(stream->Write(TwoIoRequest(true)));
    inference::ModelStreamInferResponse answer;
    ASSERT_TRUE(stream->Read(&answer));  // the stream is open on the server
    EXPECT_EQ(Infer(TwoIoRequest(true), &out, /*deadline_ms=*/1500).error_code(),
              grpc::StatusCode::DEADLINE_EXCEEDED);
    grpc::ChannelArguments own_connection;
    own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto other = GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(server_.address(), grpc::InsecureChannelCredentials(), own_connection));
    grpc::ClientContext ctx;
    EXPECT_TRUE(other->ModelInfer(&ctx, TwoIoRequest(true), &out).ok());
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  EXPECT_TRUE(Infer(TwoIoRequest(true), &out).ok());

  // Archive size: resnet18 (45 MB) is over 1 MB, refused at load; two_io serves on.
  grpc::Status s = LoadWith("", "resnet18");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("more than the limit of 1000000 bytes"), std::string::npos)
      << s.error_message();
  EXPECT_TRUE(Infer(TwoIoRequest(true), &out).ok());
}

TEST_F(SecurityTest, GrpcConnectionsOverTheLimitAreClosedAndTheServerServesOn) {
  server_.set_stderr_path((dir_ / "server.log").string());
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--no-metrics", "--no-http",
               "--grpc-max-connections=2"});
  // Each channel its own connection (channels to one address share one otherwise),
  // connected by its first call.
  auto connect = [&] {
    grpc::ChannelArguments own_connection;
    own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(server_.address(), grpc::InsecureChannelCredentials(), own_connection));
  };
  auto infer = [](GRPCInferenceService::Stub* stub) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ModelInferResponse out;
    return stub->ModelInfer(&ctx, TwoIoRequest(true), &out);
  };
  auto first = connect(), second = connect();
  ASSERT_TRUE(infer(first.get()).ok());
  ASSERT_TRUE(infer(second.get()).ok());
  for (int i = 0; i < 3; ++i) {  // closed at once: UNAVAILABLE well before the deadline
    auto over = connect();
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(infer(over.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
  EXPECT_TRUE(infer(first.get()).ok());  // the open ones serve on
  EXPECT_TRUE(infer(second.get()).ok());

  // Once one ends, and gRPC has closed its side, a new connection is served.
  first.reset();
  std::unique_ptr<GRPCInferenceService::Stub> again;
  for (int i = 0; i < 200 && again == nullptr; ++i) {
    auto stub = connect();
    if (infer(stub.get()).ok()) again = std::move(stub);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(again, nullptr);
  EXPECT_TRUE(infer(second.get()).ok());
  inference::ServerReadyResponse ready;
  grpc::ClientContext ctx;
  EXPECT_TRUE(again->ServerReady(&ctx, {}, &ready).ok() && ready.ready());

  // One warning for the three refusals (at most one every 10 s), naming the flag.
  std::ifstream in(dir_ / "server.log");
  std::string log((std::istreambuf_iterator<char>(in)), {});
  size_t warning = log.find("the limit of 2 open connections is reached (--grpc-max-connections)");
  ASSERT_NE(warning, std::string::npos) << log;
  EXPECT_EQ(log.find("--grpc-max-connections", log.find("--grpc-max-connections", warning) + 1),
            std::string::npos)
      << log;
}

TEST_F(SecurityTest, TlsAndTokenTogetherOverGrpc) {
  // Certificates made here with openssl (tests/test_util/make_test_certificates.sh).
  const fs::path certs = dir_ / "certs";
  std::string make = std::string("sh ") + MANYPY_SOURCE_DIR + "/tests/test_util/make_test_certificates.sh " +
                     certs.string();
  ASSERT_EQ(std::system(make.c_str()), 0) << make;
  StartServer([&] {
    auto args = TokenFlags();
    args.insert(args.end(), {"--model-control-mode=explicit", "--load-model=two_io", "--no-metrics",
                             "--tls-cert=" + (certs / "server.pem").string(),
                             "--tls-key=" + (certs / "server.key").string()});
    return args;
  }());
  auto read = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  grpc::SslCredentialsOptions tls;
  tls.pem_root_certs = read(certs / "ca.pem");
  auto secure = GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_.address(), grpc::SslCredentials(tls)));
  ModelInferResponse out;
  EXPECT_EQ(secure->ModelInfer(Ctx("").get(), TwoIoRequest(true), &out).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(secure->ModelInfer(Ctx(kInferenceToken).get(), TwoIoRequest(true), &out).ok());
  inference::RepositoryIndexResponse index;
  EXPECT_EQ(secure->RepositoryIndex(Ctx(kInferenceToken).get(), {}, &index).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(secure->RepositoryIndex(Ctx(kManagementToken).get(), {}, &index).ok());
  // The token does not replace TLS: a plain-text client gets no answer.
  ModelInferResponse plain_out;
  EXPECT_FALSE(stub_->ModelInfer(Ctx(kInferenceToken).get(), TwoIoRequest(true), &plain_out).ok());
}

TEST_F(SecurityTest, MetricsListenOnTheirOwnAddress) {
  // Inference over HTTP on 127.0.0.2, metrics on 127.0.0.1 only (both loopback).
  StartServer({"--model-control-mode=explicit", "--load-model=two_io", "--http-address=127.0.0.2",
               "--metrics-address=127.0.0.1"});
  ASSERT_GT(server_.metrics_port(), 0);
  Reply metrics = Send("GET", "/metrics", "", "", server_.metrics_port(), "127.0.0.1");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("manypy_"), std::string::npos);
  EXPECT_EQ(Send("GET", "/metrics", "", "", server_.metrics_port(), "127.0.0.2").status, 0);
  EXPECT_EQ(Send("GET", "/v2/health/ready", "", "", http_port(), "127.0.0.2").status, 200);
  EXPECT_EQ(Send("GET", "/v2/health/ready", "", "", http_port(), "127.0.0.1").status, 0);
}

// The shipped clients carry the token: the C++ client (bearer_token) and
// manypy-perf (--auth-token-file) over gRPC and HTTP.
TEST_F(SecurityTest, ClientAndPerfSendTheirToken) {
  StartServer([&] {
    auto args = TokenFlags();
    args.insert(args.end(), {"--model-control-mode=explicit", "--load-model=two_io", "--no-metrics"});
    return args;
  }());
  client::InferenceClient::Options with_token;
  with_token.bearer_token = kInferenceToken;
  auto client = client::InferenceClient::Create(server_.address(), with_token);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*client)->ModelMetadata("two_io").ok());
  auto anonymous = client::InferenceClient::Create(server_.address());
  ASSERT_TRUE(anonymous.ok());
  EXPECT_EQ((*anonymous)->ModelMetadata("two_io").status().code(), StatusCode::kUnauthenticated);

  const std::string token_file = (dir_ / "inference.token").string();
  for (auto [protocol, url] :
       {std::pair<std::string, std::string>{"grpc", server_.address()},
        {"http", "127.0.0.1:" + std::to_string(http_port())}}) {
    std::string perf = std::string(MANYPY_PERF_BINARY) + " -m two_io -i " + protocol + " -u " + url +
                       " --warmup-seconds 0.2 --window-seconds 0.5 --max-windows 2 --csv /dev/null";
    EXPECT_EQ(std::system((perf + " --auth-token-file " + token_file + " > /dev/null 2>&1").c_str()), 0)
        << protocol;
    EXPECT_NE(std::system((perf + " > /dev/null 2>&1").c_str()), 0) << protocol << ": served without a token";
  }
}

}  // namespace
}  // namespace manypy
