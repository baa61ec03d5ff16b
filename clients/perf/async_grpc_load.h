// AsyncGrpcLoad: closed-loop gRPC load driven by one thread (--async): every
// concurrent stream has a connection of its own and always one ModelInfer in
// flight, and one completion queue, read by the one thread that runs Run,
// starts each stream's next request as its last one returns. Fewer threads
// and wake-ups per request than a thread per stream blocked in a synchronous
// call, so the load generator takes less of the cores it shares with a
// server on the same machine (as Triton's perf_analyzer --async).
// Not thread-safe: Connect, then Run, from one thread.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "clients/cpp/inference_client.h"
#include "clients/perf/step_stats.h"

namespace manypy::perf {

class AsyncGrpcLoad {
 public:
  /// `make_client` makes one client with a connection of its own; `request`
  /// is sent by every stream (built once: the request's encoding is the
  /// client's work per call, not the building of the message).
  AsyncGrpcLoad(std::function<StatusOr<std::unique_ptr<client::InferenceClient>>()> make_client,
                inference::ModelInferRequest request, std::chrono::milliseconds timeout,
                std::chrono::milliseconds connect_timeout);
  ~AsyncGrpcLoad();

  /// Makes and connects `streams` connections (before anything is measured).
  Status Connect(int streams);
  /// Keeps one request in flight per stream, recording each into `recorder`,
  /// until `stop`; then waits for the requests in flight.
  void Run(Recorder* recorder, const std::atomic<bool>& stop);

 private:
  struct Stream;
  void Start(Stream& stream);

  const std::function<StatusOr<std::unique_ptr<client::InferenceClient>>()> make_client_;
  const inference::ModelInferRequest request_;
  const std::chrono::milliseconds timeout_, connect_timeout_;
  std::vector<std::unique_ptr<Stream>> streams_;
};

}  // namespace manypy::perf
