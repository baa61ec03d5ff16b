// The Finish stage (finish.h), and the observer it reports to
// (inference_observer.h).
#include "server/inference/finish.h"

#include <atomic>
#include <cstdio>

#include "server/inference/inference_observer.h"
#include "server/log.h"

namespace manypy {
namespace {

std::atomic<InferenceObserver*> g_observer{nullptr};

uint64_t Nanos(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b < a) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

double Millis(Clock::time_point a, Clock::time_point b) { return static_cast<double>(Nanos(a, b)) / 1e6; }

// One sampled access-log line (--access-log).
void MaybeLogAccess(const std::string& name, int64_t version, const InferenceRequest& request,
                    const Status& status, int64_t batch_rows) {
  if (!AccessLogSampled()) return;
  const RequestTimes& t = request.times;
  char ms[96];
  snprintf(ms, sizeof(ms), "total_ms=%.3f queue_ms=%.3f compute_ms=%.3f",
           Millis(t.received, t.finished), Millis(t.prepared, t.started),
           Millis(t.started, t.computed));
  std::string code = StatusCodeName(status.code());
  std::string text = "access model=" + name + " version=" + std::to_string(version) + " id=" +
                     JsonString(request.id) + " status=" + code + " rows=" +
                     std::to_string(request.batch_rows) + " batch=" + std::to_string(batch_rows) +
                     " " + ms;
  char json_ms[128];
  snprintf(json_ms, sizeof(json_ms), "\"total_ms\": %.3f, \"queue_ms\": %.3f, \"compute_ms\": %.3f",
           Millis(t.received, t.finished), Millis(t.prepared, t.started),
           Millis(t.started, t.computed));
  LogAccess(text, "\"access\": true, \"model\": " + JsonString(name) + ", \"version\": " +
                      std::to_string(version) + ", \"id\": " + JsonString(request.id) +
                      ", \"status\": \"" + code + "\", \"rows\": " +
                      std::to_string(request.batch_rows) + ", \"batch\": " +
                      std::to_string(batch_rows) + ", " + json_ms);
}

}  // namespace

void SetInferenceObserver(InferenceObserver* observer) { g_observer.store(observer); }
InferenceObserver* GetInferenceObserver() { return g_observer.load(std::memory_order_acquire); }

namespace {

// Where a finished request is counted: its model version's statistics (null
// for one that reached no loaded version) and its name for the observer.
struct FinishTarget {
  const std::string& name;
  int64_t version;
  InferenceStats* stats;
};

void Count(InferenceStats& s, const Status& status, const InferenceRequest& request) {
  const RequestTimes& t = request.times;
  if (status.ok()) {
    s.success_count++;
    s.success_ns += Nanos(t.received, t.finished);
    if (t.cache != RequestTimes::Cache::kHit) {  // as Triton: a hit is neither queued nor computed
      s.queue_count++;
      s.queue_ns += Nanos(t.prepared, t.started);
      s.compute_input_ns += Nanos(t.received, t.prepared);
      s.compute_infer_ns += Nanos(t.started, t.computed);
      s.compute_output_ns += Nanos(t.computed, t.finished);
    }
    s.last_inference_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
  } else if (status.code() == StatusCode::kCancelled) {
    s.cancel_count++;
    s.cancel_ns += Nanos(t.received, t.finished);
  } else {
    s.fail_count++;
    s.fail_ns += Nanos(t.received, t.finished);
  }
  const auto cache_ns = static_cast<uint64_t>(t.cache_time.count());
  if (t.cache == RequestTimes::Cache::kHit) {
    s.cache_hit_count++;
    s.cache_hit_ns += cache_ns;
  } else if (t.cache == RequestTimes::Cache::kMiss) {
    s.cache_miss_count++;
    s.cache_miss_ns += cache_ns;
  }
}

// The model's own failures concern the operator (WARNING); a client that left
// is worth a line (INFO) but is no fault; bad requests concern only the client.
void LogOutcome(const FinishTarget& target, const InferenceRequest& request, const Status& status) {
  if (status.ok()) return;
  const RequestTimes& t = request.times;
  bool model_fault = status.code() == StatusCode::kInternal ||
                     (status.code() == StatusCode::kDeadlineExceeded && t.started != Clock::time_point{});
  LogLevel level = model_fault                                  ? LogLevel::kWarning
                   : status.code() == StatusCode::kCancelled    ? LogLevel::kInfo
                                                                : LogLevel::kVerbose;
  if (!LogEnabled(level)) return;
  Log(level, "request '" + request.id + "' to " + target.name + " " +
                 (status.code() == StatusCode::kCancelled ? "cancelled" : "failed") + ": " +
                 status.ToString());
}

// Finish for every path: counts `request` once, then replies. `outputs` is
// null where the request may still be running (abandoned) or never ran.
void Finish(const FinishTarget& target, InferenceRequest& request, Status status,
            std::vector<Value>* outputs, int64_t batch_rows) {
  RequestTimes& t = request.times;
  // A streaming request's responses were encoded as they went.
  if (status.ok() && outputs != nullptr && request.encode) status = request.encode(*outputs);
  if (outputs != nullptr) {
    // Before the reply: once answered, the client may rewrite or unregister
    // its shared-memory regions, so a view of them the model kept must have
    // its copy now. The outputs and inputs go first: an identity model's
    // output is the input's view, which is not a view kept past the request.
    outputs->clear();
    request.inputs.clear();
    request.shm_views.Release();
  }
  t.finished = Clock::now();
  if (target.stats != nullptr) {
    Count(*target.stats, status, request);
    LogOutcome(target, request, status);
  }
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnRequestFinished(target.name, target.version, request.id, status, t, batch_rows);
  }
  if (request.span != nullptr) request.span->End(target.name, target.version, status, t, batch_rows);
  MaybeLogAccess(target.name, target.version, request, status, batch_rows);
  request.reply(status);
}

}  // namespace

void FinishRequest(const DispatchedModel& model, RequestPtr request, Status status,
                   std::vector<Value> outputs, int64_t batch_rows) {
  const Manifest& m = model.manifest();
  Finish({m.name, m.version, &model.stats()}, *request, std::move(status), &outputs, batch_rows);
  request.reset();
}

void FinishUnrouted(const std::string& name, RequestPtr request, const Status& status) {
  Finish({name, 0, nullptr}, *request, status, nullptr, 0);
}

void FinishAbandoned(const DispatchedModel& model, InferenceRequest& request, const Status& status) {
  const Manifest& m = model.manifest();
  Finish({m.name, m.version, &model.stats()}, request, status, nullptr, 0);
}

void RecordExecution(const DispatchedModel& model, size_t slot, int64_t rows, Clock::time_point started,
                     Clock::time_point ended, const std::string& error_type) {
  model.stats().execution_count++;
  model.stats().inference_count += static_cast<uint64_t>(rows);
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnExecutionFinished(model.manifest().name, model.manifest().version, slot, rows,
                                  started, ended, error_type);
  }
}

}  // namespace manypy
