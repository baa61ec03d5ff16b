// ListeningSockets: the address forms --grpc-address takes, port 0, and a port
// already in use.
#include "server/grpc/listening_sockets.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace manypy {
namespace {

// Whether a TCP connection to `ip`:`port` is established (the socket is
// accepted by the kernel: no one needs to call accept).
bool Connects(const std::string& ip, int port) {
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (ip.find(':') != std::string::npos) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&storage);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET6, ip.c_str(), &a->sin6_addr) != 1) return false;
    length = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&storage);
    a->sin_family = AF_INET;
    a->sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, ip.c_str(), &a->sin_addr) != 1) return false;
    length = sizeof(*a);
  }
  int fd = socket(storage.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool connected = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&storage), length) == 0;
  if (fd >= 0) close(fd);
  return connected;
}

bool HaveIpv6Loopback() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  close(fd);
  return ok;
}

TEST(ListeningSocketsTest, PortZeroPicksAFreePort) {
  auto sockets = ListeningSockets::Listen("127.0.0.1", 0);
  ASSERT_TRUE(sockets.ok()) << sockets.status().ToString();
  EXPECT_GT(sockets->port(), 0);
  ASSERT_EQ(sockets->fds().size(), 1u);
  EXPECT_TRUE(Connects("127.0.0.1", sockets->port()));
}

TEST(ListeningSocketsTest, HostNamesListenOnEachOfTheirAddresses) {
  auto sockets = ListeningSockets::Listen("localhost", 0);
  ASSERT_TRUE(sockets.ok()) << sockets.status().ToString();
  ASSERT_GE(sockets->fds().size(), 1u);
  EXPECT_TRUE(Connects("127.0.0.1", sockets->port()));
}

TEST(ListeningSocketsTest, WildcardsListenOnIpv4AndIpv6) {
  for (const char* any : {"0.0.0.0", "[::]", "::"}) {
    auto sockets = ListeningSockets::Listen(any, 0);
    ASSERT_TRUE(sockets.ok()) << any << ": " << sockets.status().ToString();
    EXPECT_TRUE(Connects("127.0.0.1", sockets->port())) << any;
    if (HaveIpv6Loopback()) {
      EXPECT_TRUE(Connects("::1", sockets->port())) << any;
    }
  }
}

TEST(ListeningSocketsTest, BracketedIpv6Addresses) {
  if (!HaveIpv6Loopback()) GTEST_SKIP() << "no IPv6 loopback here";
  auto sockets = ListeningSockets::Listen("[::1]", 0);
  ASSERT_TRUE(sockets.ok()) << sockets.status().ToString();
  EXPECT_TRUE(Connects("::1", sockets->port()));
  EXPECT_FALSE(Connects("127.0.0.1", sockets->port()));
}

TEST(ListeningSocketsTest, APortInUseIsUnavailableNamingTheAddress) {
  auto first = ListeningSockets::Listen("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = ListeningSockets::Listen("127.0.0.1", first->port());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(
      second.status().message().find("cannot listen on 127.0.0.1:" + std::to_string(first->port())),
      std::string::npos)
      << second.status().message();
}

TEST(ListeningSocketsTest, CloseRefusesNewClients) {
  auto sockets = ListeningSockets::Listen("127.0.0.1", 0);
  ASSERT_TRUE(sockets.ok());
  int port = sockets->port();
  ListeningSockets moved = std::move(*sockets);  // the moved-from object owns nothing
  EXPECT_TRUE(sockets->fds().empty());
  EXPECT_TRUE(Connects("127.0.0.1", port));
  moved.Close();
  EXPECT_FALSE(Connects("127.0.0.1", port));
}

}  // namespace
}  // namespace manypy
