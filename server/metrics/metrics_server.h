// MetricsServer: the Prometheus endpoint (GET /metrics in the text exposition
// format, prometheus-cpp's serializer) and the observer that feeds it. While
// it lives it is the pipeline's InferenceObserver. Thread-safe.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "common/status.h"
#include "server/inference/dispatcher.h"

namespace prometheus {
class Registry;
}  // namespace prometheus

namespace manypy {

class PrometheusObserver;
class ScrapeCollector;
class ResponseCache;

class MetricsServer {
 public:
  struct Options {
    std::string address = "0.0.0.0";
    int port = 8002;  ///< 0 picks a free port
    /// A socket already listening (inherited from the supervisor) to serve on
    /// instead of binding address:port; -1: bind. Owned by the server.
    int listen_fd = -1;
    /// False: bound (the port is known, metrics are recorded) but nothing is
    /// accepted until StartAccepting (a serving process started beside
    /// another one, which serves the shared socket until this one is ready).
    bool accept_now = true;
  };

  /// Listens, registers every metric family and installs the observer.
  /// UNAVAILABLE when the address cannot be bound. `dispatcher` (and
  /// `response_cache`, null when the server has none) must outlive the
  /// server; create it before any model loads.
  static StatusOr<std::unique_ptr<MetricsServer>> Start(const Options& options,
                                                        const Dispatcher* dispatcher,
                                                        const ResponseCache* response_cache = nullptr);
  /// Stops serving and uninstalls the observer; call when no request runs any more.
  ~MetricsServer();

  /// Starts accepting scrapes (after Options::accept_now = false); idempotent.
  void StartAccepting();
  /// Stops accepting scrapes (the socket stays open for whoever shares it);
  /// Scrape() still works. Idempotent.
  void StopAccepting();

  int port() const { return port_; }
  /// "http://ADDRESS:PORT/metrics".
  std::string url() const;
  /// The exposition text a scrape gets now.
  std::string Scrape() const;
  /// Where more families go (a model's own metrics: python_metrics.h).
  prometheus::Registry* registry() const { return registry_.get(); }

 private:
  MetricsServer() = default;
  /// The HTTP thread: one connection at a time (scrapes are rare and small;
  /// civetweb, prometheus-cpp's exposer, cannot start threads in this process:
  /// its fixed 100 KiB thread stacks are smaller than the static TLS of
  /// libtorch, OpenBLAS and glog together).
  void Serve();

  std::string address_;
  int port_ = 0;
  int listen_fd_ = -1;
  // Wakes Serve's poll at shutdown: shutdown(2) of the listening socket would
  // stop it listening for the supervisor's next child too, which shares it.
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  // Started and stopped by one thread (main's).
  bool accepting_ = false;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ScrapeCollector> collector_;
  std::unique_ptr<PrometheusObserver> observer_;
  std::thread thread_;
};

}  // namespace manypy
