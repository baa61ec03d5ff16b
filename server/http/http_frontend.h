// HttpFrontend: KServe v2 REST (with Triton's binary-data extension) on one port,
// plain or TLS: an acceptor, a few I/O threads, a strand per connection, HttpRouter
// into the same request path as gRPC. Thread-safe; Start, then StartDraining, then Stop.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/http/connection_limiter.h"
#include "server/http/http_router.h"
#include "server/http/http_session.h"
#include "server/tls/tls_credentials.h"

namespace boost::asio {
class io_context;
}

namespace manypy {

class HttpFrontend {
 public:
  struct Options {
    std::string address = "0.0.0.0";
    int port = 8000;  ///< 0 picks a free one
    int io_threads = 2;
    HttpSessionLimits limits;
    int max_connections = 1024;  ///< open at once; one more is closed at once
    std::shared_ptr<const TlsCredentials> tls;  ///< null: plain HTTP; else TLS only
    /// A socket already listening (inherited from the supervisor) to accept
    /// on instead of binding address:port; -1: bind. Owned by the frontend.
    int listen_fd = -1;
  };

  /// Listens and serves on its own threads. UNAVAILABLE when it cannot listen;
  /// INVALID_ARGUMENT when OpenSSL refuses the TLS credentials.
  /// `server` must outlive the frontend.
  static StatusOr<std::unique_ptr<HttpFrontend>> Start(InferenceServer* server, Options options);
  ~HttpFrontend();

  /// The port it listens on (the one picked, for port 0).
  int port() const { return port_; }
  /// Stops accepting; open connections are served, each closed after its next
  /// reply (the listening socket stays open for whoever shares it: the
  /// supervisor's next child, which accepts the clients' new connections).
  void StopAccepting();
  /// Stops accepting, gives responses in flight up to `wait` to be written,
  /// then closes every connection and joins the I/O threads. Call once the
  /// dispatcher has answered every request.
  void Stop(std::chrono::milliseconds wait = std::chrono::milliseconds(1000));

 private:
  struct Io;
  HttpFrontend(InferenceServer* server, Options options);
  void Accept();
  /// After accept() failed for want of descriptors or memory: waits (AcceptBackoff), then accepts.
  void WaitThenAccept(const boost::system::error_code& ec);
  /// After a connection is accepted: ends a back-off episode, logging how long it lasted.
  void AcceptedAgain();
  /// Serves a connection Accept took (or refuses it over Options::max_connections).
  void ServeAccepted(boost::asio::ip::tcp::socket socket);
  /// Starts an accepted connection's session, holding its ConnectionLimiter slot.
  template <typename Session>
  static void StartSession(std::shared_ptr<Session> session, std::shared_ptr<void> slot);
  /// Closes a connection accepted over Options::max_connections.
  void RefuseConnection(boost::asio::ip::tcp::socket socket);

  const Options options_;
  HttpRouter router_;
  ConnectionLimiter connections_;
  std::unique_ptr<Io> io_;
  int port_ = 0;
  std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
  // Set by StopAccepting: replies end their connections from then on.
  std::shared_ptr<std::atomic<bool>> closing_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::thread> threads_;
  bool stopped_ = false;
  std::atomic<bool> refused_logged_{false};
};

}  // namespace manypy
