// ConnectRaw: a plain TCP connection to the server under test that sends
// nothing, for tests of what the server does with idle, slow or excess
// connections. Thread-safe (no state).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace manypy::testing {

/// A TCP connection to 127.0.0.1:`port`, its descriptor (the caller closes
/// it); -1 when no socket could be made or the connection was refused.
inline int ConnectRaw(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) return fd;
  close(fd);
  return -1;
}

}  // namespace manypy::testing
