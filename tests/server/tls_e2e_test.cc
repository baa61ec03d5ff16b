// TLS end to end: the real manypy-server with --tls-cert/--tls-key (and
// --tls-client-ca) and certificates the test makes with the openssl command;
// gRPC (the C++ client), HTTPS (Beast over OpenSSL) and manypy-perf over both.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "clients/cpp/inference_client.h"
#include "proto/grpc_service.grpc.pb.h"
#include "tests/test_util/http_client.h"
#include "tests/test_util/https_client.h"
#include "tests/test_util/server_process.h"

namespace manypy {
namespace {

namespace fs = std::filesystem;
using client::InferenceClient;
using client::InferInputs;
using client::InferOptions;
using testing::HttpConnection;
using testing::HttpsConnection;

const char* kTwoIoJson = R"({"inputs": [
  {"name": "INPUT_A", "shape": [4], "datatype": "FP32", "data": [1, 2, 3, 4]},
  {"name": "INPUT_B", "shape": [4], "datatype": "INT64", "data": [10, 20, 30, 40]}]})";

// A directory of test certificates (tests/test_util/make_test_certificates.sh), made once.
const fs::path& Certificates() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("manypy_tls_test_" + std::to_string(getpid()));
    std::string cmd = std::string("sh ") + MANYPY_SOURCE_DIR + "/tests/test_util/make_test_certificates.sh " +
                      d.string();
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return d;
  }();
  return dir;
}
std::string Pem(const std::string& name) { return (Certificates() / name).string(); }

// Removes the certificates when the test program ends.
class RemoveCertificates : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(fs::temp_directory_path() / ("manypy_tls_test_" + std::to_string(getpid())), ignored);
  }
};
const auto* const kRemoveCertificates = ::testing::AddGlobalTestEnvironment(new RemoveCertificates);

std::vector<std::string> ServerArgs(std::vector<std::string> tls_args) {
  tls_args.insert(tls_args.end(), {"--model-control-mode=explicit", "--load-model=two_io", "--interpreters=1",
                                   "--no-metrics", std::string("--model-repository=") + MANYPY_TEST_REPOSITORY});
  return tls_args;
}

InferInputs TwoIoInputs() {
  InferInputs inputs(2);
  inputs[0].name = "INPUT_A";
  inputs[0].datatype = "FP32";
  inputs[0].shape = {4};
  std::vector<float> a{1, 2, 3, 4};
  inputs[0].raw.assign(reinterpret_cast<const char*>(a.data()), a.size() * sizeof(float));
  inputs[1].name = "INPUT_B";
  inputs[1].datatype = "INT64";
  inputs[1].shape = {4};
  std::vector<int64_t> b{10, 20, 30, 40};
  inputs[1].raw.assign(reinterpret_cast<const char*>(b.data()), b.size() * sizeof(int64_t));
  return inputs;
}

// A gRPC client of `address` with TLS options; plain text when `ca` is empty.
std::unique_ptr<InferenceClient> GrpcClient(const std::string& address, const std::string& ca,
                                            const std::string& cert = "", const std::string& key = "") {
  InferenceClient::Options options;
  options.default_timeout = std::chrono::milliseconds(30000);
  options.dedicated_connection = true;  // no connection shared with another test's client
  options.tls.ca_file = ca;
  options.tls.cert_file = cert;
  options.tls.key_file = key;
  auto created = InferenceClient::Create(address, options);
  EXPECT_TRUE(created.ok()) << created.status().ToString();
  return created.ok() ? std::move(*created) : nullptr;
}

// two_io's SUM over gRPC, or the call's error.
StatusOr<std::vector<float>> GrpcSum(InferenceClient* c) {
  InferOptions o;
  o.model_name = "two_io";
  auto r = c->Infer(TwoIoInputs(), o);
  if (!r.ok()) return r.status();
  return r->AsFloat("SUM");
}

// Runs `command` (stderr folded into stdout); its exit status and output.
std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string out;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

class TlsServer : public ::testing::Test {
 protected:
  static void StartServer(testing::ServerProcess** server, std::vector<std::string> tls_args) {
    *server = new testing::ServerProcess();
    ASSERT_TRUE((*server)->Start(MANYPY_SERVER_BINARY, ServerArgs(std::move(tls_args))))
        << "server did not start";
  }
  static void StopServer(testing::ServerProcess** server) {
    if (*server == nullptr) return;
    EXPECT_EQ((*server)->Stop(), 0);
    delete *server;
    *server = nullptr;
  }
};

// --tls-cert and --tls-key: TLS only, no client certificate asked for.
class TlsTest : public TlsServer {
 protected:
  static void SetUpTestSuite() {
    StartServer(&server_, {"--tls-cert=" + Pem("server.pem"), "--tls-key=" + Pem("server.key"),
                           "--allow-client-shm"});
  }
  static void TearDownTestSuite() { StopServer(&server_); }
  static testing::ServerProcess* server_;
};
testing::ServerProcess* TlsTest::server_ = nullptr;

// Client shared memory, although allowed, is refused over TLS (only
// --allow-client-shm-remote lifts that): docs/operations.md#system-shared-memory.
TEST_F(TlsTest, SharedMemoryIsRefusedOverTls) {
  HttpsConnection c(server_->http_port(), Pem("ca.pem"));
  ASSERT_FALSE(c.handshake_error()) << c.handshake_error().message();
  auto reply = c.Send("POST", "/v2/systemsharedmemory/region/r/register",
                      R"({"key": "/manypy_tls_shm", "offset": 0, "byte_size": 16})");
  EXPECT_EQ(reply.status, 403) << reply.body;
  EXPECT_NE(reply.body.find("refused over a TLS connection"), std::string::npos) << reply.body;
  reply = c.Send("GET", "/v2/systemsharedmemory/status");
  EXPECT_EQ(reply.status, 403) << reply.body;

  std::ifstream ca(Pem("ca.pem"));
  std::stringstream pem;
  pem << ca.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_->address(), grpc::SslCredentials(ssl)));
  grpc::ClientContext ctx;
  inference::SystemSharedMemoryStatusResponse status;
  grpc::Status s = stub->SystemSharedMemoryStatus(&ctx, inference::SystemSharedMemoryStatusRequest(), &status);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_NE(s.error_message().find("refused over a TLS connection"), std::string::npos) << s.error_message();
}

TEST_F(TlsTest, GrpcClientWithTheRightCaIsServed) {
  auto c = GrpcClient(server_->address(), Pem("ca.pem"));
  ASSERT_NE(c, nullptr);
  auto sum = GrpcSum(c.get());
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(*sum, (std::vector<float>{11, 22, 33, 44}));
  // The host name in the address is checked against the certificate too.
  auto by_name = GrpcClient("localhost:" + server_->address().substr(server_->address().rfind(':') + 1),
                            Pem("ca.pem"));
  auto live = by_name->ServerLive();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_TRUE(*live);
}

TEST_F(TlsTest, HttpsClientWithTheRightCaIsServed) {
  HttpsConnection c(server_->http_port(), Pem("ca.pem"));
  ASSERT_FALSE(c.handshake_error()) << c.handshake_error().message();
  EXPECT_EQ(c.Send("GET", "/v2/health/ready").status, 200);
  auto reply = c.Send("POST", "/v2/models/two_io/infer", kTwoIoJson);  // same keep-alive connection
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find(R"("data":[11.0,22.0,33.0,44.0])"), std::string::npos) << reply.body;
}

TEST_F(TlsTest, PlainTextClientsAreRefused) {
  auto c = GrpcClient(server_->address(), "");
  auto live = c->ServerLive();
  ASSERT_FALSE(live.ok());
  EXPECT_EQ(live.status().code(), StatusCode::kUnavailable) << live.status().ToString();

  HttpConnection plain(server_->http_port());
  EXPECT_EQ(plain.Send("GET", "/v2/health/ready").status, 0);  // no HTTP reply, the connection ends
  // The server keeps serving TLS clients.
  HttpsConnection tls(server_->http_port(), Pem("ca.pem"));
  EXPECT_EQ(tls.Send("GET", "/v2/health/live").status, 200);
}

TEST_F(TlsTest, ClientsWithAnotherCaRefuseTheServer) {
  auto c = GrpcClient(server_->address(), Pem("other_ca.pem"));
  auto live = c->ServerLive();
  ASSERT_FALSE(live.ok());
  EXPECT_EQ(live.status().code(), StatusCode::kUnavailable) << live.status().ToString();

  HttpsConnection https(server_->http_port(), Pem("other_ca.pem"));
  EXPECT_TRUE(https.handshake_error());
  EXPECT_NE(https.handshake_error().message().find("certificate verify failed"), std::string::npos)
      << https.handshake_error().message();
}

TEST_F(TlsTest, OnlyTls12AndNewerAreNegotiatedOnBothPorts) {
  for (int port : {std::stoi(server_->address().substr(server_->address().rfind(':') + 1)),
                   server_->http_port()}) {
    std::string s_client = "openssl s_client -connect 127.0.0.1:" + std::to_string(port) + " -CAfile " +
                           Pem("ca.pem") + " </dev/null";
    // SECLEVEL=0 lets this OpenSSL offer TLS 1.1 at all; the server must refuse it.
    auto [old_code, old_out] = RunCommand(s_client + " -tls1_1 -cipher DEFAULT@SECLEVEL=0");
    // Refused either way: an alert (OpenSSL via Asio) or the connection closed (gRPC).
    EXPECT_NE(old_code, 0) << port << ": " << old_out;
    EXPECT_NE(old_out.find("Cipher is (NONE)"), std::string::npos) << port << ": " << old_out;
    // s_client's exit status after a handshake depends on how the peer closes: not checked.
    std::string out = RunCommand(s_client + " -tls1_2").second;
    EXPECT_NE(out.find("Protocol  : TLSv1.2"), std::string::npos) << port << ": " << out;
    EXPECT_NE(out.find("Verify return code: 0 (ok)"), std::string::npos) << port << ": " << out;
  }
}

// manypy-perf over `protocol` with `flags`; the JSON it wrote, or "" when it failed.
std::string RunPerf(const std::string& url, const std::string& protocol, const std::string& flags,
                    std::string* output) {
  std::string json = (Certificates() / ("perf_" + protocol + ".json")).string();
  std::remove(json.c_str());
  auto [code, out] = RunCommand(std::string(MANYPY_PERF_BINARY) + " -m two_io -i " + protocol + " -u " + url +
                         " --warmup-seconds 0.2 --window-seconds 0.5 --max-windows 2 --csv /dev/null --json " +
                         json + " " + flags);
  *output = out;
  if (code != 0) return "";
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(TlsTest, PerfRunsOverGrpcAndHttps) {
  std::string http_url = "https://127.0.0.1:" + std::to_string(server_->http_port());
  for (auto [protocol, url] : {std::pair<std::string, std::string>{"grpc", server_->address()},
                               {"http", http_url}}) {
    std::string out;
    std::string json = RunPerf(url, protocol, "--tls-ca " + Pem("ca.pem"), &out);
    ASSERT_FALSE(json.empty()) << protocol << ": " << out;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(json, m, std::regex("\"successes\": ([0-9]+)"))) << json;
    EXPECT_GT(std::stoi(m[1]), 0) << protocol << ": " << json;
    EXPECT_NE(json.find("\"errors\": 0,"), std::string::npos) << protocol << ": " << json;
    // Without the CA it cannot verify the server and says so.
    EXPECT_TRUE(RunPerf(url, protocol, "--tls-ca " + Pem("other_ca.pem"), &out).empty()) << out;
  }
}

// --tls-client-ca too: clients need a certificate signed by that CA.
class MutualTlsTest : public TlsServer {
 protected:
  static void SetUpTestSuite() {
    StartServer(&server_, {"--tls-cert=" + Pem("server.pem"), "--tls-key=" + Pem("server.key"),
                           "--tls-client-ca=" + Pem("ca.pem")});
  }
  static void TearDownTestSuite() { StopServer(&server_); }
  static testing::ServerProcess* server_;
};
testing::ServerProcess* MutualTlsTest::server_ = nullptr;

TEST_F(MutualTlsTest, GrpcClientCertificateSignedByTheCaIsServed) {
  auto c = GrpcClient(server_->address(), Pem("ca.pem"), Pem("client.pem"), Pem("client.key"));
  auto sum = GrpcSum(c.get());
  ASSERT_TRUE(sum.ok()) << sum.status().ToString();
  EXPECT_EQ(*sum, (std::vector<float>{11, 22, 33, 44}));
}

TEST_F(MutualTlsTest, GrpcClientsWithoutOrWithAForeignCertificateAreRefused) {
  auto none = GrpcClient(server_->address(), Pem("ca.pem"));
  auto live = none->ServerLive();
  ASSERT_FALSE(live.ok());
  EXPECT_EQ(live.status().code(), StatusCode::kUnavailable) << live.status().ToString();
  auto foreign = GrpcClient(server_->address(), Pem("ca.pem"), Pem("other_client.pem"), Pem("other_client.key"));
  live = foreign->ServerLive();
  ASSERT_FALSE(live.ok());
  EXPECT_EQ(live.status().code(), StatusCode::kUnavailable) << live.status().ToString();
}

TEST_F(MutualTlsTest, HttpsClientCertificateSignedByTheCaIsServed) {
  HttpsConnection c(server_->http_port(), Pem("ca.pem"), Pem("client.pem"), Pem("client.key"));
  ASSERT_FALSE(c.handshake_error()) << c.handshake_error().message();
  auto reply = c.Send("POST", "/v2/models/two_io/infer", kTwoIoJson);
  ASSERT_EQ(reply.status, 200) << reply.body;
  EXPECT_NE(reply.body.find(R"("data":[11.0,22.0,33.0,44.0])"), std::string::npos) << reply.body;
}

TEST_F(MutualTlsTest, HttpsClientsWithoutOrWithAForeignCertificateAreRefused) {
  // TLS 1.3: the client may finish its handshake before the server's alert
  // arrives; either way no request is answered.
  HttpsConnection none(server_->http_port(), Pem("ca.pem"));
  EXPECT_EQ(none.Send("GET", "/v2/health/ready").status, 0);
  HttpsConnection foreign(server_->http_port(), Pem("ca.pem"), Pem("other_client.pem"), Pem("other_client.key"));
  EXPECT_EQ(foreign.Send("GET", "/v2/health/ready").status, 0);
  HttpsConnection good(server_->http_port(), Pem("ca.pem"), Pem("client.pem"), Pem("client.key"));
  EXPECT_EQ(good.Send("GET", "/v2/health/ready").status, 200);  // still serving
}

TEST_F(MutualTlsTest, PerfWithAClientCertificateRunsOverGrpcAndHttps) {
  std::string http_url = "https://127.0.0.1:" + std::to_string(server_->http_port());
  std::string client = "--tls-ca " + Pem("ca.pem") + " --tls-cert " + Pem("client.pem") + " --tls-key " +
                       Pem("client.key");
  for (auto [protocol, url] : {std::pair<std::string, std::string>{"grpc", server_->address()},
                               {"http", http_url}}) {
    std::string out;
    std::string json = RunPerf(url, protocol, client, &out);
    ASSERT_FALSE(json.empty()) << protocol << ": " << out;
    EXPECT_NE(json.find("\"errors\": 0,"), std::string::npos) << protocol << ": " << json;
    EXPECT_TRUE(RunPerf(url, protocol, "--tls-ca " + Pem("ca.pem"), &out).empty()) << out;
  }
}

// --grpc-max-connections over mutual TLS: connections within the limit reach gRPC
// with the port's TLS credentials (client certificates still required), those
// over it are closed before any handshake.
TEST_F(TlsServer, GrpcConnectionLimitHoldsOverMutualTls) {
  testing::ServerProcess server;
  const std::string log = (Certificates() / "limit.log").string();
  server.set_stderr_path(log);
  ASSERT_TRUE(server.Start(MANYPY_SERVER_BINARY,
                           ServerArgs({"--tls-cert=" + Pem("server.pem"), "--tls-key=" + Pem("server.key"),
                                       "--tls-client-ca=" + Pem("ca.pem"), "--grpc-max-connections=2",
                                       "--no-http"})))
      << "server did not start";
  auto with_certificate = [&] {
    return GrpcClient(server.address(), Pem("ca.pem"), Pem("client.pem"), Pem("client.key"));
  };
  auto served = [](InferenceClient* c) {
    auto sum = GrpcSum(c);
    return sum.ok() && *sum == std::vector<float>{11, 22, 33, 44};
  };
  auto first = with_certificate();
  ASSERT_TRUE(served(first.get()));
  auto without = GrpcClient(server.address(), Pem("ca.pem"));
  EXPECT_EQ(without->ServerLive().status().code(), StatusCode::kUnavailable);
  without.reset();
  // That failed handshake's connection is gRPC's to close: retry until it has.
  std::unique_ptr<InferenceClient> second;
  for (int i = 0; i < 200 && second == nullptr; ++i) {
    auto c = with_certificate();
    if (served(c.get())) second = std::move(c);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_NE(second, nullptr);
  auto third = with_certificate();
  EXPECT_EQ(third->ServerLive().status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(served(first.get()));
  EXPECT_TRUE(served(second.get()));
  EXPECT_EQ(server.Stop(), 0);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(text.find("the limit of 2 open connections is reached (--grpc-max-connections)"),
            std::string::npos)
      << text;
}

// Bad flag combinations stop the start with exit status 2 and a message naming the problem.
TEST(TlsFlagsTest, BadCombinationsAndFilesFailClearly) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--tls-cert=" + Pem("server.pem"), "--tls-key is missing"},
      {"--tls-key=" + Pem("server.key"), "--tls-cert is missing"},
      {"--tls-client-ca=" + Pem("ca.pem"), "--tls-client-ca needs --tls-cert and --tls-key"},
      {"--tls-cert=" + Pem("nope.pem") + " --tls-key=" + Pem("server.key"), Pem("nope.pem") + " does not exist"},
      {"--tls-cert=" + Pem("server.pem") + " --tls-key=" + Pem("client.key"),
       "the private key in " + Pem("client.key") + " does not match the certificate in " + Pem("server.pem")},
      {"--tls-cert=" + Pem("server.key") + " --tls-key=" + Pem("server.key"), "holds no PEM certificate"},
      {"--tls-cert=" + Pem("server.pem") + " --tls-key=" + Pem("server.pem"), "holds no unencrypted PEM private key"},
      {"--tls-cert=" + Pem("server.pem") + " --tls-key=" + Pem("server.key") + " --tls-client-ca=" +
           Pem("server.key"),
       "--tls-client-ca: " + Pem("server.key") + " holds no PEM certificate"},
  };
  for (const auto& [flags, message] : cases) {
    auto [code, out] = RunCommand(std::string(MANYPY_SERVER_BINARY) + " --interpreters=1 --no-metrics " + flags);
    EXPECT_EQ(code, 2) << flags << "\n" << out;
    EXPECT_NE(out.find(message), std::string::npos) << flags << "\n" << out;
  }
  if (geteuid() != 0) {  // root reads any file: the unreadable case only exists for others
    std::string unreadable = Pem("unreadable.key");
    fs::copy_file(Pem("server.key"), unreadable, fs::copy_options::overwrite_existing);
    fs::permissions(unreadable, fs::perms::none);
    auto [code, out] = RunCommand(std::string(MANYPY_SERVER_BINARY) + " --tls-cert=" + Pem("server.pem") +
                           " --tls-key=" + unreadable);
    EXPECT_EQ(code, 2) << out;
    EXPECT_NE(out.find("--tls-key: cannot read " + unreadable), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace manypy
