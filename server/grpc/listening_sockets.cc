#include "server/grpc/listening_sockets.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/log.h"

namespace manypy {
namespace {

struct Address {
  sockaddr_storage storage{};
  socklen_t length = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

void SetPort(Address* a, int port) {
  if (a->storage.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&a->storage)->sin6_port = htons(static_cast<uint16_t>(port));
  } else {
    reinterpret_cast<sockaddr_in*>(&a->storage)->sin_port = htons(static_cast<uint16_t>(port));
  }
}

std::string Numeric(const Address& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  const void* ip =
      a.storage.ss_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr);
  inet_ntop(a.storage.ss_family, ip, text, sizeof(text));
  return text;
}

// A socket bound to `a` and listening; -1 with errno set when it cannot be.
int BindAndListen(const Address& a, bool dual_stack) {
  int fd = socket(a.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1, off = 0;
  // A restarted server binds at once, though its old connections are in TIME_WAIT.
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  // Accepted sockets inherit it; gRPC sets it on its own listeners too.
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (a.storage.ss_family == AF_INET6) {
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, dual_stack ? &off : &on, sizeof(on));
  }
  if (bind(fd, a.get(), a.length) != 0 || listen(fd, SOMAXCONN) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

int BoundPort(int fd) {
  Address a;
  a.length = sizeof(a.storage);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.length) != 0) return 0;
  return ntohs(a.storage.ss_family == AF_INET6
                   ? reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_port
                   : reinterpret_cast<sockaddr_in*>(&a.storage)->sin_port);
}

// `host`'s addresses, each once; empty with `*error` set when it does not resolve.
std::vector<Address> Resolve(const std::string& host, std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found); rc != 0) {
    *error = gai_strerror(rc);
    return {};
  }
  std::vector<Address> addresses;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
        ai->ai_addrlen > sizeof(sockaddr_storage)) {
      continue;
    }
    Address a;
    memcpy(&a.storage, ai->ai_addr, ai->ai_addrlen);
    a.length = ai->ai_addrlen;
    bool seen = false;
    for (const Address& b : addresses)
      seen |= b.length == a.length && memcmp(&b.storage, &a.storage, a.length) == 0;
    if (!seen) addresses.push_back(a);
  }
  freeaddrinfo(found);
  return addresses;
}

}  // namespace

StatusOr<ListeningSockets> ListeningSockets::Listen(const std::string& host, int port,
                                                    const std::string& what) {
  // IPv6 addresses come bracketed in HOST:PORT addresses ("[::1]:8001").
  std::string name = host.size() > 2 && host.front() == '[' && host.back() == ']'
                         ? host.substr(1, host.size() - 2)
                         : host;
  const std::string where = host + ":" + std::to_string(port);
  ListeningSockets sockets;
  int last_errno = 0;
  if (name.empty() || name == "0.0.0.0" || name == "::") {
    // Every interface, as gRPC's listener: one dual-stack IPv6 socket, or an
    // IPv4 one where the machine has no IPv6.
    Address any6, any4;
    any6.length = sizeof(sockaddr_in6);
    any6.storage.ss_family = AF_INET6;  // in6addr_any is all zeros
    any4.length = sizeof(sockaddr_in);
    any4.storage.ss_family = AF_INET;  // INADDR_ANY is zero
    for (Address* a : {&any6, &any4}) {
      SetPort(a, port);
      int fd = BindAndListen(*a, /*dual_stack=*/true);
      if (fd >= 0) {
        sockets.fds_.push_back(fd);
        break;
      }
      last_errno = errno;
    }
  } else {
    std::string error;
    std::vector<Address> addresses = Resolve(name, &error);
    if (addresses.empty()) {
      return InvalidArgument(what + ": cannot resolve the address '" + host +
                             "': " + (error.empty() ? "no IPv4 or IPv6 address" : error));
    }
    for (Address& a : addresses) {
      // Port 0: the first bound socket picks it, the others take the same.
      SetPort(&a, sockets.fds_.empty() ? port : BoundPort(sockets.fds_.front()));
      int fd = BindAndListen(a, /*dual_stack=*/false);
      if (fd >= 0) {
        sockets.fds_.push_back(fd);
        continue;
      }
      last_errno = errno;
      // As gRPC's listener: a name whose addresses are partly unusable (e.g.
      // "localhost" where IPv6 is off) is served on the usable ones.
      if (addresses.size() > 1) {
        Log(LogLevel::kInfo, what + ": not listening on " + Numeric(a) + " (one address of " + host +
                                 "): " + strerror(last_errno));
      }
    }
  }
  if (sockets.fds_.empty()) {
    return Unavailable(what + ": cannot listen on " + where + ": " + strerror(last_errno));
  }
  sockets.port_ = BoundPort(sockets.fds_.front());
  return sockets;
}

ListeningSockets ListeningSockets::Adopt(std::vector<int> fds) {
  ListeningSockets sockets;
  sockets.fds_ = std::move(fds);
  for (int fd : sockets.fds_) fcntl(fd, F_SETFD, FD_CLOEXEC);
  if (!sockets.fds_.empty()) sockets.port_ = BoundPort(sockets.fds_.front());
  return sockets;
}

ListeningSockets::ListeningSockets(ListeningSockets&& other) noexcept
    : fds_(std::move(other.fds_)), port_(other.port_) {
  other.fds_.clear();
}

ListeningSockets& ListeningSockets::operator=(ListeningSockets&& other) noexcept {
  if (this != &other) {
    Close();
    fds_ = std::move(other.fds_);
    other.fds_.clear();
    port_ = other.port_;
  }
  return *this;
}

ListeningSockets::~ListeningSockets() { Close(); }

void ListeningSockets::KeepFirstOnly() {
  for (size_t i = 1; i < fds_.size(); ++i) close(fds_[i]);
  if (fds_.size() > 1) fds_.resize(1);
}

void ListeningSockets::Close() {
  for (int fd : fds_) close(fd);
  fds_.clear();
}

}  // namespace manypy
