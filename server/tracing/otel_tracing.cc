// Tracing with opentelemetry-cpp: request spans (RequestSpan) made by the
// SDK's tracer, sampled parent-based by trace-id ratio, handed to the batch
// span processor, and sent by its thread with the OTLP/HTTP exporter behind a
// counter of what the collector took and what it did not.
#include <opentelemetry/context/propagation/text_map_propagator.h>
#include <opentelemetry/exporters/otlp/otlp_http_exporter_factory.h>
#include <opentelemetry/exporters/otlp/otlp_http_exporter_options.h>
#include <opentelemetry/sdk/common/global_log_handler.h>
#include <opentelemetry/sdk/resource/resource.h>
#include <opentelemetry/sdk/trace/batch_span_processor_factory.h>
#include <opentelemetry/sdk/trace/batch_span_processor_options.h>
#include <opentelemetry/sdk/trace/exporter.h>
#include <opentelemetry/sdk/trace/samplers/parent_factory.h>
#include <opentelemetry/sdk/trace/samplers/trace_id_ratio_factory.h>
#include <opentelemetry/sdk/trace/tracer_provider.h>
#include <opentelemetry/sdk/trace/tracer_provider_factory.h>
#include <opentelemetry/trace/context.h>
#include <opentelemetry/trace/propagation/http_trace_context.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <variant>

#include "server/inference/inference_request.h"
#include "server/log.h"
#include "server/tracing/tracing.h"

namespace manypy {
namespace {

namespace otel = opentelemetry;
namespace nostd = opentelemetry::nostd;
namespace trace_api = opentelemetry::trace;
namespace trace_sdk = opentelemetry::sdk::trace;

using OtelAttributes = std::vector<std::pair<nostd::string_view, otel::common::AttributeValue>>;

otel::common::AttributeValue ToOtel(const TraceValue& value) {
  return std::visit(
      [](const auto& v) -> otel::common::AttributeValue {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return nostd::string_view(v.data(), v.size());
        } else {
          return v;
        }
      },
      value);
}

// Views of `attributes` (which must outlive the call they are passed to:
// the SDK copies them).
OtelAttributes ToOtel(const TraceAttributes& attributes) {
  OtelAttributes out;
  out.reserve(attributes.size());
  for (const auto& [key, value] : attributes) out.emplace_back(key, ToOtel(value));
  return out;
}

// The spans carry steady-clock times (the pipeline's); a span's start also
// needs its wall-clock time, which the SDK keeps with the steady duration.
otel::common::SystemTimestamp WallTime(Clock::time_point t) {
  const auto wall = std::chrono::system_clock::now() - (Clock::now() - t);
  return otel::common::SystemTimestamp(std::chrono::time_point_cast<std::chrono::system_clock::duration>(wall));
}

// The W3C headers as the propagator reads and writes them.
class HeaderCarrier final : public otel::context::propagation::TextMapCarrier {
 public:
  explicit HeaderCarrier(TraceParent* headers) : headers_(headers) {}
  nostd::string_view Get(nostd::string_view key) const noexcept override {
    if (key == "traceparent") return headers_->traceparent;
    if (key == "tracestate") return headers_->tracestate;
    return "";
  }
  void Set(nostd::string_view key, nostd::string_view value) noexcept override {
    if (key == "traceparent") headers_->traceparent = std::string(value);
    if (key == "tracestate") headers_->tracestate = std::string(value);
  }

 private:
  TraceParent* headers_;
};

// gRPC's status code numbers, for rpc.grpc.status_code.
int GrpcCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 0;
    case StatusCode::kCancelled: return 1;
    case StatusCode::kInvalidArgument: return 3;
    case StatusCode::kDeadlineExceeded: return 4;
    case StatusCode::kNotFound: return 5;
    case StatusCode::kAlreadyExists: return 6;
    case StatusCode::kPermissionDenied: return 7;
    case StatusCode::kResourceExhausted: return 8;
    case StatusCode::kFailedPrecondition: return 9;
    case StatusCode::kInternal: return 13;
    case StatusCode::kUnavailable: return 14;
    case StatusCode::kUnauthenticated: return 16;
  }
  return 2;  // UNKNOWN
}

class OtelRequestSpan final : public RequestSpan {
 public:
  OtelRequestSpan(nostd::shared_ptr<trace_api::Tracer> tracer, nostd::shared_ptr<trace_api::Span> span,
                  bool grpc)
      : tracer_(std::move(tracer)), span_(std::move(span)), grpc_(grpc) {}

  bool recording() const override { return span_->IsRecording(); }

  std::string TraceId() const override {
    char id[32];
    span_->GetContext().trace_id().ToLowerBase16(id);
    return std::string(id, sizeof id);
  }

  TraceParent ChildParent() const override {
    TraceParent parent;
    parent.nested = true;
    HeaderCarrier carrier(&parent);
    otel::context::Context context;
    context = trace_api::SetSpan(context, span_);
    trace_api::propagation::HttpTraceContext().Inject(carrier, context);
    return parent;
  }

  void SetAttribute(const std::string& key, const TraceValue& value) override {
    if (span_->IsRecording()) span_->SetAttribute(key, ToOtel(value));
  }

  void AddEvent(const std::string& name, const TraceAttributes& attributes) override {
    if (span_->IsRecording()) span_->AddEvent(name, ToOtel(attributes));
  }

  void AddChild(const std::string& name, Clock::time_point start, Clock::time_point end,
                const TraceAttributes& attributes, const std::string& error) override {
    if (!span_->IsRecording()) return;
    trace_api::StartSpanOptions options;
    options.parent = span_->GetContext();
    options.start_steady_time = otel::common::SteadyTimestamp(start);
    options.start_system_time = WallTime(start);
    auto child = tracer_->StartSpan(name, ToOtel(attributes), options);
    if (!error.empty()) child->SetStatus(trace_api::StatusCode::kError, error);
    trace_api::EndSpanOptions ended;
    ended.end_steady_time = otel::common::SteadyTimestamp(std::max(start, end));
    child->End(ended);
  }

  void End(const std::string& model, int64_t version, const Status& status, const RequestTimes& t,
           int64_t batch_rows) override {
    if (span_->IsRecording()) {
      span_->SetAttribute("manypy.model.name", model);
      if (version > 0) span_->SetAttribute("manypy.model.version", version);
      span_->SetAttribute("manypy.outcome", StatusCodeName(status.code()));
      span_->SetAttribute("manypy.batch_size", batch_rows);
      if (grpc_) span_->SetAttribute("rpc.grpc.status_code", GrpcCode(status.code()));
      if (!status.ok()) span_->SetStatus(trace_api::StatusCode::kError, status.ToString());
      const TraceAttributes model_attributes = {{"manypy.model.name", model},
                                                {"manypy.model.version", version}};
      if (t.cache != RequestTimes::Cache::kNone) {
        const Clock::time_point from = t.prepared;
        TraceAttributes cache = model_attributes;
        cache.emplace_back("manypy.cache.hit", t.cache == RequestTimes::Cache::kHit);
        AddChild("manypy.cache", from,
                 from + std::chrono::duration_cast<Clock::duration>(t.cache_time), cache, "");
      }
      if (t.started != Clock::time_point{}) {
        AddChild("manypy.queue", t.prepared, t.started, model_attributes, "");
        TraceAttributes execute = model_attributes;
        execute.emplace_back("manypy.batch_size", batch_rows);
        const Clock::time_point computed = t.computed != Clock::time_point{} ? t.computed : t.finished;
        AddChild("manypy.execute", t.started, computed, execute,
                 status.code() == StatusCode::kInternal ? status.ToString() : "");
      }
    }
    trace_api::EndSpanOptions ended;
    ended.end_steady_time = otel::common::SteadyTimestamp(t.finished);
    span_->End(ended);
  }

 private:
  const nostd::shared_ptr<trace_api::Tracer> tracer_;
  const nostd::shared_ptr<trace_api::Span> span_;
  const bool grpc_;  // a gRPC call: rpc.grpc.status_code
};

class OtelRequestTracer final : public RequestTracer {
 public:
  explicit OtelRequestTracer(nostd::shared_ptr<trace_api::Tracer> tracer) : tracer_(std::move(tracer)) {}

  std::shared_ptr<RequestSpan> Start(const TraceParent& parent, const std::string& model,
                                     Clock::time_point received) override {
    trace_api::StartSpanOptions options;
    options.kind = parent.nested ? trace_api::SpanKind::kInternal : trace_api::SpanKind::kServer;
    options.start_steady_time = otel::common::SteadyTimestamp(received);
    options.start_system_time = WallTime(received);
    if (!parent.traceparent.empty()) {
      // A malformed traceparent yields an invalid context: a trace of its own.
      TraceParent headers = parent;
      HeaderCarrier carrier(&headers);
      otel::context::Context context;
      context = trace_api::propagation::HttpTraceContext().Extract(carrier, context);
      trace_api::SpanContext client = trace_api::GetSpan(context)->GetContext();
      if (client.IsValid()) options.parent = client;
    }
    bool grpc = false;
    for (const auto& [key, value] : parent.attributes) {
      if (key == "rpc.system") grpc = std::get_if<std::string>(&value) != nullptr &&
                                      *std::get_if<std::string>(&value) == "grpc";
    }
    auto span = tracer_->StartSpan("infer " + model, ToOtel(parent.attributes), options);
    return std::make_shared<OtelRequestSpan>(tracer_, std::move(span), grpc);
  }

 private:
  const nostd::shared_ptr<trace_api::Tracer> tracer_;
};

// What the collector took and what it did not, shared by the exporter (on
// the batch processor's thread) and the Tracing (for the log).
struct ExportCounts {
  std::atomic<int64_t> exported{0};
  std::atomic<int64_t> dropped{0};
  std::atomic<int64_t> last_warning_ns{0};
  /// Spans the OTLP exporter reported failed through the SDK's log while an
  /// export ran: opentelemetry-cpp 1.19's OTLP/HTTP exporter logs a failed
  /// send ("Export N trace span(s) error") but returns success from Export.
  std::atomic<int64_t> failed_in_log{0};
};

// The SDK's own messages: into the server's log (verbose: a failed export
// is summed up by CountingExporter's warning), and the failed exports counted.
class SdkLogHandler final : public otel::sdk::common::internal_log::LogHandler {
 public:
  explicit SdkLogHandler(std::shared_ptr<ExportCounts> counts) : counts_(std::move(counts)) {}

  void Handle(otel::sdk::common::internal_log::LogLevel level, const char* file, int line,
              const char* message, const otel::sdk::common::AttributeMap&) noexcept override {
    const std::string text = message != nullptr ? message : "";
    constexpr const char* kFailed = "ERROR: Export ";
    if (size_t at = text.find(kFailed); at != std::string::npos &&
                                        text.find(" trace span(s) error", at) != std::string::npos) {
      counts_->failed_in_log += std::atoll(text.c_str() + at + std::strlen(kFailed));
    }
    if (LogEnabled(LogLevel::kVerbose)) {
      Log(LogLevel::kVerbose, std::string("opentelemetry: ") +
                                  (level == otel::sdk::common::internal_log::LogLevel::Error ? "error: " : "") +
                                  text);
    }
  }

 private:
  const std::shared_ptr<ExportCounts> counts_;
};

// The OTLP exporter, counted: a failed export (the collector unreachable or
// refusing) drops its spans, which is logged at most once a minute.
class CountingExporter final : public trace_sdk::SpanExporter {
 public:
  CountingExporter(std::unique_ptr<trace_sdk::SpanExporter> inner, std::shared_ptr<ExportCounts> counts,
                   std::string endpoint, std::function<void(int64_t, int64_t)> on_export)
      : inner_(std::move(inner)),
        counts_(std::move(counts)),
        endpoint_(std::move(endpoint)),
        on_export_(std::move(on_export)) {}

  std::unique_ptr<trace_sdk::Recordable> MakeRecordable() noexcept override {
    return inner_->MakeRecordable();
  }

  otel::sdk::common::ExportResult Export(
      const nostd::span<std::unique_ptr<trace_sdk::Recordable>>& spans) noexcept override {
    const auto n = static_cast<int64_t>(spans.size());
    counts_->failed_in_log.store(0);
    auto result = inner_->Export(spans);
    const bool logged_failure = counts_->failed_in_log.exchange(0) > 0;
    if (result == otel::sdk::common::ExportResult::kSuccess && !logged_failure) {
      counts_->exported += n;
      if (on_export_) on_export_(n, 0);
      return result;
    }
    const int64_t dropped = counts_->dropped += n;
    if (on_export_) on_export_(0, n);
    const int64_t now = Clock::now().time_since_epoch().count();
    int64_t last = counts_->last_warning_ns.load();
    if ((last == 0 || now - last >= int64_t{60'000'000'000}) &&
        counts_->last_warning_ns.compare_exchange_strong(last, now)) {
      Log(LogLevel::kWarning, "tracing: the collector at " + endpoint_ + " did not take " +
                                  std::to_string(n) + " spans (unreachable or refusing); " +
                                  std::to_string(dropped) + " spans dropped so far (at most one "
                                  "such line a minute)");
    }
    return otel::sdk::common::ExportResult::kFailure;
  }

  bool ForceFlush(std::chrono::microseconds timeout) noexcept override { return inner_->ForceFlush(timeout); }
  bool Shutdown(std::chrono::microseconds timeout) noexcept override { return inner_->Shutdown(timeout); }

 private:
  const std::unique_ptr<trace_sdk::SpanExporter> inner_;
  const std::shared_ptr<ExportCounts> counts_;
  const std::string endpoint_;
  const std::function<void(int64_t, int64_t)> on_export_;
};

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// OTEL_BSP_* (the batch span processor's variables), as milliseconds or counts.
Status EnvCount(const char* name, int64_t min, int64_t* out) {
  const std::string v = Env(name);
  if (v.empty()) return Status::Ok();
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used != v.size() || n < min) throw std::out_of_range(v);
    *out = n;
    return Status::Ok();
  } catch (const std::exception&) {
    return InvalidArgument(std::string(name) + " needs an integer >= " + std::to_string(min) +
                           ", got '" + v + "'");
  }
}

class OtelTracing final : public Tracing {
 public:
  OtelTracing(std::unique_ptr<trace_sdk::TracerProvider> provider, std::shared_ptr<ExportCounts> counts,
              std::string description)
      : provider_(std::move(provider)),
        counts_(std::move(counts)),
        description_(std::move(description)),
        tracer_(provider_->GetTracer("manypy-server", MANYPY_VERSION)) {
    otel::sdk::common::internal_log::GlobalLogHandler::SetLogHandler(
        nostd::shared_ptr<otel::sdk::common::internal_log::LogHandler>(new SdkLogHandler(counts_)));
    SetRequestTracer(&tracer_);
  }

  ~OtelTracing() override {
    if (GetRequestTracer() == &tracer_) SetRequestTracer(nullptr);
    provider_->ForceFlush(std::chrono::seconds(2));
    provider_->Shutdown(std::chrono::seconds(1));
    otel::sdk::common::internal_log::GlobalLogHandler::SetLogHandler(
        nostd::shared_ptr<otel::sdk::common::internal_log::LogHandler>(
            new otel::sdk::common::internal_log::NoopLogHandler()));
    Log(LogLevel::kInfo, "tracing: " + std::to_string(exported_spans()) + " spans exported, " +
                             std::to_string(dropped_spans()) + " dropped");
  }

  std::string Describe() const override { return description_; }
  int64_t exported_spans() const override { return counts_->exported.load(); }
  int64_t dropped_spans() const override { return counts_->dropped.load(); }

 private:
  const std::unique_ptr<trace_sdk::TracerProvider> provider_;
  const std::shared_ptr<ExportCounts> counts_;
  const std::string description_;
  OtelRequestTracer tracer_;
};

}  // namespace

bool TracingBuiltIn() { return true; }

std::string TracingUnavailableReason() { return ""; }

StatusOr<std::unique_ptr<Tracing>> StartTracing(const TracingOptions& options) {
  // The exporter's options read OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _TIMEOUT
  // and _HEADERS themselves; the flag wins over the endpoint variables.
  otel::exporter::otlp::OtlpHttpExporterOptions http;
  if (!options.endpoint.empty()) http.url = options.endpoint;
  if (http.url.rfind("http://", 0) != 0 && http.url.rfind("https://", 0) != 0) {
    return InvalidArgument("--trace-endpoint (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) needs an http:// or "
                           "https:// URL of an OTLP/HTTP traces receiver, got '" + http.url + "'");
  }

  double ratio = options.sample_ratio;
  if (ratio < 0) {
    const std::string arg = Env("OTEL_TRACES_SAMPLER_ARG");
    ratio = 1.0;
    if (!arg.empty()) {
      try {
        size_t used = 0;
        ratio = std::stod(arg, &used);
        if (used != arg.size() || !(ratio >= 0 && ratio <= 1)) throw std::out_of_range(arg);
      } catch (const std::exception&) {
        return InvalidArgument("OTEL_TRACES_SAMPLER_ARG needs a ratio in [0, 1], got '" + arg + "'");
      }
    }
  }

  // service.name: the flag, else OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES
  // (which Resource::Create reads), else manypy-server.
  otel::sdk::resource::ResourceAttributes attributes;
  std::string service = options.service_name;
  if (service.empty() && Env("OTEL_SERVICE_NAME").empty() &&
      Env("OTEL_RESOURCE_ATTRIBUTES").find("service.name=") == std::string::npos) {
    service = "manypy-server";
  }
  if (!service.empty()) attributes.SetAttribute("service.name", service);
  attributes.SetAttribute("service.version", MANYPY_VERSION);
  for (const std::string& pair : options.resource) {
    const size_t eq = pair.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--trace-resource needs KEY=VALUE, got '" + pair + "'");
    }
    attributes.SetAttribute(pair.substr(0, eq), pair.substr(eq + 1));
  }
  auto resource = otel::sdk::resource::Resource::Create(attributes);

  trace_sdk::BatchSpanProcessorOptions batch;
  int64_t delay_ms = batch.schedule_delay_millis.count();
  int64_t queue = static_cast<int64_t>(batch.max_queue_size);
  int64_t batch_size = static_cast<int64_t>(batch.max_export_batch_size);
  MANYPY_RETURN_IF_ERROR(EnvCount("OTEL_BSP_SCHEDULE_DELAY", 1, &delay_ms));
  MANYPY_RETURN_IF_ERROR(EnvCount("OTEL_BSP_MAX_QUEUE_SIZE", 1, &queue));
  MANYPY_RETURN_IF_ERROR(EnvCount("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 1, &batch_size));
  batch.schedule_delay_millis = std::chrono::milliseconds(delay_ms);
  batch.max_queue_size = static_cast<size_t>(queue);
  batch.max_export_batch_size = static_cast<size_t>(std::min(batch_size, queue));

  auto counts = std::make_shared<ExportCounts>();
  const std::string endpoint = http.url;
  auto exporter = std::make_unique<CountingExporter>(
      otel::exporter::otlp::OtlpHttpExporterFactory::Create(http), counts, endpoint, options.on_export);
  auto processor = trace_sdk::BatchSpanProcessorFactory::Create(std::move(exporter), batch);
  std::shared_ptr<trace_sdk::Sampler> by_ratio = trace_sdk::TraceIdRatioBasedSamplerFactory::Create(ratio);
  auto provider = trace_sdk::TracerProviderFactory::Create(
      std::move(processor), resource, trace_sdk::ParentBasedSamplerFactory::Create(by_ratio));

  auto service_name = resource.GetAttributes().find("service.name");
  std::string described = "OTLP/HTTP to " + endpoint + ", sample ratio " + std::to_string(ratio) +
                          " (parent-based), service.name " +
                          (service_name != resource.GetAttributes().end()
                               ? nostd::get<std::string>(service_name->second)
                               : std::string("?")) +
                          ", batches every " + std::to_string(delay_ms) + " ms (queue " +
                          std::to_string(queue) + ")";
  return std::unique_ptr<Tracing>(new OtelTracing(std::move(provider), counts, std::move(described)));
}

}  // namespace manypy
