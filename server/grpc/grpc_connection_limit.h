// GrpcConnectionLimit: accepts the gRPC port's connections on a thread of its
// own and hands them to the gRPC server while fewer than a limit are open;
// closes the others at once. Start, Stop and the destructor: one thread.
#pragma once

#include <grpcpp/server_builder.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>

#include "common/status.h"
#include "server/grpc/handed_over_sockets.h"
#include "server/grpc/listening_sockets.h"

namespace manypy {

/// grpc 1.51 has no server option bounding its connections, but it serves
/// connections accepted outside it (ServerBuilder's external connection
/// acceptor, with the port's credentials: TLS included). Use:
///   auto sockets = ListeningSockets::Listen(host, port);
///   auto acceptor = builder.experimental().AddExternalConnectionAcceptor(FROM_FD, creds);
///   auto server = builder.BuildAndStart();
///   auto limit = GrpcConnectionLimit::Start(std::move(*sockets), std::move(acceptor), n);
///   ... limit->Stop(); server->Shutdown();
class GrpcConnectionLimit {
 public:
  using Acceptor = grpc::experimental::ExternalConnectionAcceptor;

  /// Accepts on `sockets` and hands connections to `acceptor`, at most
  /// `max_connections` (>= 1) open at once. Call after the server that made
  /// `acceptor` has started: gRPC leaves a connection handed to it before its
  /// start or after its shutdown open and unserved. INTERNAL when the thread's
  /// wake-up descriptor cannot be made.
  static StatusOr<std::unique_ptr<GrpcConnectionLimit>> Start(ListeningSockets sockets,
                                                              std::unique_ptr<Acceptor> acceptor,
                                                              int max_connections);

  /// Stops accepting and closes the listening sockets (new clients are then
  /// refused by the kernel); connections already handed over stay with gRPC.
  /// Call before the server shuts down. Idempotent.
  void Stop();
  /// After Stop: how many of the connections handed to gRPC are still open
  /// (gRPC closes one when its client has gone away); 0 when /proc/self/fd
  /// cannot be read, as then nothing is known to wait for.
  size_t OpenAfterStop();
  ~GrpcConnectionLimit();

 private:
  GrpcConnectionLimit(ListeningSockets sockets, std::unique_ptr<Acceptor> acceptor,
                      int max_connections, int wake_fd);
  void AcceptLoop();
  // Accepts what is queued on `listener` (a bounded batch); false when the loop must pause.
  bool AcceptQueued(int listener);
  void Admit(int listener, int fd);
  bool HasRoom();
  void Refuse(int fd);

  // Constant after construction.
  const std::unique_ptr<Acceptor> acceptor_;
  const int max_connections_;
  const int wake_fd_;  // an eventfd: Stop() writes it, the accept thread wakes and ends

  // Used by the accept thread only (and by Stop once it has joined it).
  ListeningSockets sockets_;
  HandedOverSockets handed_over_;
  std::chrono::steady_clock::time_point last_recount_{};
  std::chrono::steady_clock::time_point last_warning_{};  // of the refusals
  int64_t refused_since_warning_ = 0;
  std::chrono::steady_clock::time_point last_accept_error_log_{};
  std::chrono::steady_clock::time_point last_recount_error_log_{};

  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace manypy
