// ListeningSockets: the TCP sockets of one HOST:PORT address, bound and
// listening (non-blocking, close-on-exec), closed on destruction.
// Not thread-safe; its fds may be polled and accepted on from any one thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

class ListeningSockets {
 public:
  /// Binds `host`:`port` and listens. `host` is an IP address ("127.0.0.1",
  /// "::1" or "[::1]") or a name (every address it resolves to, e.g. both
  /// loopbacks for "localhost"). "0.0.0.0" and "::" listen on every interface,
  /// IPv6 and IPv4 alike, as gRPC's own listener does. Port 0 picks a free port,
  /// the same for every address. UNAVAILABLE, naming the address, when no address
  /// can be bound; INVALID_ARGUMENT when the name does not resolve. Messages
  /// start with `what` (the endpoint: "gRPC", "HTTP", "metrics").
  static StatusOr<ListeningSockets> Listen(const std::string& host, int port,
                                           const std::string& what = "gRPC");
  /// Owns sockets already listening (inherited from the supervisor, which
  /// bound them with Listen): made close-on-exec; the port is theirs.
  static ListeningSockets Adopt(std::vector<int> fds);

  ListeningSockets(ListeningSockets&& other) noexcept;
  ListeningSockets& operator=(ListeningSockets&& other) noexcept;
  ListeningSockets(const ListeningSockets&) = delete;
  ListeningSockets& operator=(const ListeningSockets&) = delete;
  ~ListeningSockets();

  /// One or more; owned here.
  const std::vector<int>& fds() const { return fds_; }
  /// The bound port (the one picked when 0 was asked for).
  int port() const { return port_; }

  /// Closes every socket but the first (for an endpoint that serves one).
  void KeepFirstOnly();
  /// Closes every socket (clients connecting then are refused); idempotent.
  void Close();

 private:
  ListeningSockets() = default;

  std::vector<int> fds_;
  int port_ = 0;
};

}  // namespace manypy
