// RequestSpan and RequestTracer: a request's place in a distributed trace
// (OpenTelemetry), as the transport-neutral pipeline sees it. The frontends
// pass the client's W3C trace context (TraceParent) in; core/ starts one
// RequestSpan per request and carries it in the InferenceRequest; Finish ends
// it with the request's outcome and times. The implementation lives in
// server/tracing/ (built only where opentelemetry-cpp is); without a tracer
// installed nothing is started and a request carries a null span.
// Thread contract: the tracer is set once at startup; a RequestSpan may be
// used from any thread (it locks inside), End is called once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace manypy {

struct RequestTimes;

/// An attribute's value, as OpenTelemetry takes it.
using TraceValue = std::variant<bool, int64_t, double, std::string>;
using TraceAttributes = std::vector<std::pair<std::string, TraceValue>>;

/// What a frontend hands over: the client's W3C `traceparent` and `tracestate`
/// (empty: none, or not valid, and the request starts its own trace), and the
/// protocol's own attributes for the request span (rpc.*, http.*, server.*).
struct TraceParent {
  std::string traceparent;
  std::string tracestate;
  TraceAttributes attributes;
  /// The parent is a request in this server (a nested manypy.infer), not a client.
  bool nested = false;
};

class RequestSpan {
 public:
  virtual ~RequestSpan() = default;
  /// Sampled: its spans will be exported. An unsampled span still carries its
  /// context, so that nested calls follow the same decision.
  virtual bool recording() const = 0;
  /// The trace's id, 32 lowercase hex digits.
  virtual std::string TraceId() const = 0;
  /// This span as the parent of a request it makes (a nested manypy.infer).
  virtual TraceParent ChildParent() const = 0;
  virtual void SetAttribute(const std::string& key, const TraceValue& value) = 0;
  /// An event now (a streamed response).
  virtual void AddEvent(const std::string& name, const TraceAttributes& attributes) = 0;
  /// A child span that ran over [start, end] (the wait for an on-demand load,
  /// a span a model's Python recorded); `error` non-empty marks it failed.
  virtual void AddChild(const std::string& name, std::chrono::steady_clock::time_point start,
                        std::chrono::steady_clock::time_point end,
                        const TraceAttributes& attributes, const std::string& error) = 0;
  /// Ends the request span with its outcome, and records its children from
  /// `times`: the queue wait, the execution, a response-cache lookup.
  /// `version` 0: the request reached no model. `batch_rows` 0: it did not run.
  virtual void End(const std::string& model, int64_t version, const Status& status,
                   const RequestTimes& times, int64_t batch_rows) = 0;
};

class RequestTracer {
 public:
  virtual ~RequestTracer() = default;
  /// A span for a request to `model` received at `received`, child of
  /// `parent` when that holds a valid traceparent.
  virtual std::shared_ptr<RequestSpan> Start(const TraceParent& parent, const std::string& model,
                                             std::chrono::steady_clock::time_point received) = 0;
};

/// Installs the tracer (null: none). Call before any request, and set it back
/// to null only when nothing runs any more.
void SetRequestTracer(RequestTracer* tracer);
/// The tracer, or null.
RequestTracer* GetRequestTracer();

}  // namespace manypy
