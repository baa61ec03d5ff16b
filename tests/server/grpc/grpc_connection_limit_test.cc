// GrpcConnectionLimit with a real gRPC server (a health check only): the
// limit closes connections over it, frees a slot when gRPC closes one, logs a
// flood once, and stops promptly.
#include "server/grpc/grpc_connection_limit.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "proto/health.grpc.pb.h"
#include "tests/test_util/raw_connection.h"

namespace manypy {
namespace {

using std::chrono::steady_clock;

// Whether the server ends a raw connection without a byte (within 10 s).
bool ClosedAtOnce(int port) {
  int fd = testing::ConnectRaw(port);
  if (fd < 0) return false;
  timeval ten_seconds{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &ten_seconds, sizeof(ten_seconds));
  char byte;
  ssize_t n = recv(fd, &byte, 1, 0);
  bool closed = n == 0 || (n < 0 && errno == ECONNRESET);
  close(fd);
  return closed;
}

// grpc.health.v1.Health/Check, always SERVING: the one method the test server has.
class AlwaysServing final : public grpc::health::v1::Health::CallbackService {
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest*,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    response->set_status(grpc::health::v1::HealthCheckResponse::SERVING);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

class GrpcConnectionLimitTest : public ::testing::Test {
 protected:
  void Start(int max_connections) {
    auto sockets = ListeningSockets::Listen("127.0.0.1", 0);
    ASSERT_TRUE(sockets.ok()) << sockets.status().ToString();
    port_ = sockets->port();
    grpc::ServerBuilder builder;
    auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    auto limit =
        GrpcConnectionLimit::Start(std::move(*sockets), std::move(acceptor), max_connections);
    ASSERT_TRUE(limit.ok()) << limit.status().ToString();
    limit_ = std::move(*limit);
  }
  void TearDown() override {
    if (limit_) limit_->Stop();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  // A channel with a connection of its own: channels to one address share one otherwise.
  std::shared_ptr<grpc::Channel> NewChannel() const {
    grpc::ChannelArguments own_connection;
    own_connection.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials(), own_connection);
  }
  static grpc::Status Check(const std::shared_ptr<grpc::Channel>& channel) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckResponse response;
    return grpc::health::v1::Health::NewStub(channel)->Check(&ctx, {}, &response);
  }

  int port_ = 0;
  AlwaysServing service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<GrpcConnectionLimit> limit_;  // after server_: stops first
};

TEST_F(GrpcConnectionLimitTest, ConnectionsOverTheLimitAreClosedUntilOneEnds) {
  Start(2);
  auto first = NewChannel(), second = NewChannel();
  ASSERT_TRUE(Check(first).ok());
  ASSERT_TRUE(Check(second).ok());
  {
    auto third = NewChannel();
    auto start = steady_clock::now();
    EXPECT_EQ(Check(third).error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(5));  // closed, not left waiting
  }
  EXPECT_TRUE(Check(first).ok());
  EXPECT_TRUE(Check(second).ok());

  first.reset();  // the client closes its connection; gRPC closes its end once it sees that
  bool served = false;
  for (int i = 0; i < 200 && !served; ++i) {
    served = Check(NewChannel()).ok();
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(served);
  EXPECT_TRUE(Check(second).ok());
}

TEST_F(GrpcConnectionLimitTest, AFloodOverTheLimitLogsOneWarning) {
  Start(1);
  auto held = NewChannel();
  ASSERT_TRUE(Check(held).ok());
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 20; ++i) EXPECT_TRUE(ClosedAtOnce(port_)) << i;
  std::string log = ::testing::internal::GetCapturedStderr();
  size_t first = log.find("--grpc-max-connections");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find("--grpc-max-connections", first + 1), std::string::npos) << log;
  EXPECT_NE(log.find("the limit of 1 open connections is reached"), std::string::npos) << log;
  EXPECT_TRUE(Check(held).ok());  // the one within the limit serves on
}

TEST_F(GrpcConnectionLimitTest, StopEndsAcceptingPromptlyAndLeavesOpenConnectionsToGrpc) {
  Start(2);
  auto open = NewChannel();
  ASSERT_TRUE(Check(open).ok());
  auto start = steady_clock::now();
  limit_->Stop();
  limit_->Stop();  // idempotent
  EXPECT_LT(steady_clock::now() - start, std::chrono::seconds(1));
  EXPECT_EQ(testing::ConnectRaw(port_), -1);  // the port is closed
  EXPECT_TRUE(Check(open).ok());
}

TEST(GrpcConnectionLimitStartTest, ALimitBelowOneIsRefused) {
  auto sockets = ListeningSockets::Listen("127.0.0.1", 0);
  ASSERT_TRUE(sockets.ok());
  auto limit = GrpcConnectionLimit::Start(std::move(*sockets), nullptr, 0);
  EXPECT_EQ(limit.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace manypy
