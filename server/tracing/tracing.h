// Tracing: OpenTelemetry export of every request's spans (OTLP over HTTP),
// started from the server's options. Built only where opentelemetry-cpp is
// (Debian 13's opentelemetry-cpp-dev; CMake finds it or leaves it out): a
// build without it refuses the tracing flags, saying why. The spans themselves
// are started and ended by the pipeline through server/inference/request_trace.h.
// Thread contract: StartTracing and the Tracing's destructor run on the
// server's startup and shutdown thread; the spans are exported by the
// OpenTelemetry SDK's batch span processor on its own thread, off the request path.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace manypy {

/// From the flags (empty / negative: take the standard OTEL_* variable, else the default).
struct TracingOptions {
  bool enabled = false;                 ///< --tracing
  std::string endpoint;                 ///< --trace-endpoint: OTLP/HTTP traces URL
  double sample_ratio = -1;             ///< --trace-sample-ratio in [0, 1]
  std::string service_name;             ///< --trace-service-name
  std::vector<std::string> resource;    ///< --trace-resource KEY=VALUE (repeatable)
  /// Optional: told after each export, on the exporter's thread, how many
  /// spans the collector took and how many were dropped (for metrics).
  std::function<void(int64_t exported, int64_t dropped)> on_export;
};

/// Whether this server was built with OpenTelemetry.
bool TracingBuiltIn();
/// Why it was not (empty when it was).
std::string TracingUnavailableReason();

/// The running exporter. Destroying it stops tracing: the tracer is
/// uninstalled, the spans still queued are sent (for at most 2 s), and the
/// totals are logged.
class Tracing {
 public:
  virtual ~Tracing() = default;
  /// For the start-up log: endpoint, ratio, service name.
  virtual std::string Describe() const = 0;
  /// Spans sent to the collector / lost (the collector did not take them).
  virtual int64_t exported_spans() const = 0;
  virtual int64_t dropped_spans() const = 0;
};

/// Starts the exporter and installs the request tracer (SetRequestTracer).
/// FAILED_PRECONDITION naming the reason on a build without OpenTelemetry;
/// INVALID_ARGUMENT naming a bad option or OTEL_* variable.
StatusOr<std::unique_ptr<Tracing>> StartTracing(const TracingOptions& options);

}  // namespace manypy
