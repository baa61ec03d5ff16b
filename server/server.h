// Server: the composition root. Builds the whole object graph of a serving
// process from ServerOptions in one written order and takes it down in the
// reverse one. Start, Drain and Wait are for one controlling thread.
#pragma once

#include <chrono>
#include <memory>

#include "common/status.h"
#include "server/server_options.h"
#include "server/supervisor/supervised_child.h"

namespace manypy {

class Server {
 public:
  /// Starts everything in this order: credentials (token and TLS files), the
  /// interpreter pool, the dispatcher, the response cache, the metrics
  /// endpoint, the `manypy` module in every interpreter, the model manager,
  /// the Python services, the start-up models, the inference core, gRPC, then
  /// HTTP; once it returns, both frontends serve. INVALID_ARGUMENT when an
  /// option's file is wrong (a token, a certificate); another code when a part
  /// cannot start, its message saying which.
  /// `supervised`: the sockets (and ready pipe) a supervisor handed over
  /// (supervised_child.h); null when this process listens itself.
  static StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options,
                                                 SupervisedChild* supervised = nullptr);
  /// Stops what still runs, in the reverse order of Start.
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Refuses new requests (readiness turns false on both frontends), lets
  /// queued and running ones finish for at most `grace`, then abandons the
  /// rest (their clients get UNAVAILABLE) and stops both frontends. Returns
  /// how many model calls were still running: with any, the caller must exit
  /// without destroying the server (their interpreters are busy).
  size_t Drain(std::chrono::seconds grace);
  /// The supervisor's switch (kStepAsideSignal): a newer serving process
  /// accepts on the shared sockets now. Stops accepting on every endpoint,
  /// sends every gRPC connection GOAWAY (its clients make their next call on
  /// a new connection, to the new process) and lets calls in flight finish,
  /// then drains what is left as Drain does, all within `grace`. Returns as Drain.
  size_t StepAside(std::chrono::seconds grace);
  /// Blocks until Drain has stopped the gRPC server.
  void Wait();

  int grpc_port() const;
  /// 0 without HTTP (--no-http).
  int http_port() const;

 private:
  struct Parts;
  explicit Server(std::unique_ptr<Parts> parts);
  Status StartParts(const ServerOptions& options, SupervisedChild* supervised);
  Status StartGrpc(const ServerOptions& options, SupervisedChild* supervised);

  std::unique_ptr<Parts> parts_;
};

}  // namespace manypy
