#include "server/grpc/grpc_connection_limit.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "server/log.h"

namespace manypy {
namespace {

using Clock = std::chrono::steady_clock;

// Connections accepted per listening socket before the loop looks at Stop() again.
constexpr int kAcceptBatch = 64;
// Recounting reads /proc/self/fd, a system call per open descriptor: while the
// limit holds under a flood of connections, at most this often.
constexpr auto kRecountInterval = std::chrono::milliseconds(10);
// A flood of refused connections logs one line per interval, not one per connection.
constexpr auto kWarningInterval = std::chrono::seconds(10);
// When accept() fails for want of descriptors or memory, it would fail again at once.
constexpr int kPauseAfterAcceptErrorMs = 100;

bool Due(Clock::time_point last, Clock::duration interval, Clock::time_point now) {
  return last == Clock::time_point{} || now - last >= interval;
}

}  // namespace

StatusOr<std::unique_ptr<GrpcConnectionLimit>> GrpcConnectionLimit::Start(
    ListeningSockets sockets, std::unique_ptr<Acceptor> acceptor, int max_connections) {
  if (max_connections < 1) return InvalidArgument("gRPC: the connection limit must be at least 1");
  // Without it no closed connection would ever be seen: every slot taken for good.
  if (access("/proc/self/fd", R_OK) != 0) {
    return FailedPrecondition(std::string("gRPC: counting open connections reads /proc/self/fd: ") +
                              strerror(errno));
  }
  int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) return Internal(std::string("gRPC: cannot make an eventfd: ") + strerror(errno));
  std::unique_ptr<GrpcConnectionLimit> limit(
      new GrpcConnectionLimit(std::move(sockets), std::move(acceptor), max_connections, wake_fd));
  limit->thread_ = std::thread([l = limit.get()] { l->AcceptLoop(); });
  return limit;
}

GrpcConnectionLimit::GrpcConnectionLimit(ListeningSockets sockets,
                                         std::unique_ptr<Acceptor> acceptor, int max_connections,
                                         int wake_fd)
    : acceptor_(std::move(acceptor)),
      max_connections_(max_connections),
      wake_fd_(wake_fd),
      sockets_(std::move(sockets)) {}

void GrpcConnectionLimit::Stop() {
  if (stopped_) return;
  stopped_ = true;
  const uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof(one)) != sizeof(one)) {
    Log(LogLevel::kError, std::string("gRPC: cannot wake the accept thread: ") + strerror(errno));
  }
  if (thread_.joinable()) thread_.join();
  sockets_.Close();
}

size_t GrpcConnectionLimit::OpenAfterStop() {
  Stop();  // the accept thread, which owns handed_over_ until then, has ended
  return handed_over_.Recount() ? handed_over_.size() : 0;
}

GrpcConnectionLimit::~GrpcConnectionLimit() {
  Stop();
  close(wake_fd_);
}

void GrpcConnectionLimit::AcceptLoop() {
  std::vector<pollfd> polled;
  for (int fd : sockets_.fds()) polled.push_back({fd, POLLIN, 0});
  polled.push_back({wake_fd_, POLLIN, 0});
  for (;;) {
    if (poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      Log(LogLevel::kError,
          std::string("gRPC: cannot wait for connections, accepting no more: ") + strerror(errno));
      return;
    }
    if (polled.back().revents != 0) return;  // Stop()
    for (size_t i = 0; i + 1 < polled.size(); ++i) {
      if (polled[i].revents == 0 || AcceptQueued(polled[i].fd)) continue;
      pollfd wake{wake_fd_, POLLIN, 0};
      poll(&wake, 1, kPauseAfterAcceptErrorMs);  // returns early on Stop(); the loop then sees it
      break;
    }
  }
}

bool GrpcConnectionLimit::AcceptQueued(int listener) {
  for (int i = 0; i < kAcceptBatch; ++i) {
    // Non-blocking, as gRPC's own accepted sockets: its event engine needs them so.
    int fd = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      Admit(listener, fd);
      continue;
    }
    switch (errno) {
      case EAGAIN:
        return true;
      case EINTR:
      case ECONNABORTED:  // that client gave up while queued
      case EPROTO:
      case EPERM:  // refused by a firewall rule
        continue;
      default:
        if (Due(last_accept_error_log_, kWarningInterval, Clock::now())) {
          last_accept_error_log_ = Clock::now();
          Log(LogLevel::kWarning, std::string("gRPC: cannot accept connections: ") +
                                      strerror(errno) + " (logged at most once every 10 s)");
        }
        return false;  // EMFILE, ENFILE, ENOBUFS, ENOMEM: pause, then retry
    }
  }
  return true;
}

void GrpcConnectionLimit::Admit(int listener, int fd) {
  if (!HasRoom()) {
    Refuse(fd);
    return;
  }
  // As on the sockets gRPC accepts itself (inherited there from its listener).
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
  if (!handed_over_.Add(fd)) {
    close(fd);
    return;
  }
  Acceptor::NewConnectionParameters connection;
  connection.listener_fd = listener;
  connection.fd = fd;
  acceptor_->HandleNewConnection(&connection);  // gRPC owns and closes `fd` from here on
}

bool GrpcConnectionLimit::HasRoom() {
  if (handed_over_.size() < static_cast<size_t>(max_connections_)) return true;
  // Full as last counted: see which connections gRPC has closed since.
  const Clock::time_point now = Clock::now();
  if (!Due(last_recount_, kRecountInterval, now)) return false;
  last_recount_ = now;
  if (!handed_over_.Recount()) {
    // Typically no descriptor is left to open the directory with: closing this
    // connection frees one.
    if (Due(last_recount_error_log_, kWarningInterval, now)) {
      last_recount_error_log_ = now;
      Log(LogLevel::kWarning,
          std::string("gRPC: cannot read /proc/self/fd to count open connections: ") +
              strerror(errno) +
              "; closing new ones until it can (logged at most once "
              "every 10 s)");
    }
    return false;
  }
  return handed_over_.size() < static_cast<size_t>(max_connections_);
}

void GrpcConnectionLimit::Refuse(int fd) {
  // Closed before anything is read or written: the client's connection ends at
  // once (its call fails UNAVAILABLE), and no TLS handshake is spent on it.
  close(fd);
  ++refused_since_warning_;
  const Clock::time_point now = Clock::now();
  if (!Due(last_warning_, kWarningInterval, now)) return;
  last_warning_ = now;
  Log(LogLevel::kWarning, "gRPC: the limit of " + std::to_string(max_connections_) +
                              " open connections is reached (--grpc-max-connections); closed " +
                              std::to_string(refused_since_warning_) +
                              " new connection(s) at once since the last such line (logged at most "
                              "once every 10 s)");
  refused_since_warning_ = 0;
}

}  // namespace manypy
