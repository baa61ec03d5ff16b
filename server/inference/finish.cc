// FinishRequest and RecordExecution (declared in model_queue.h).
#include "server/inference/model_queue.h"

#include "server/log.h"

namespace manypy {
namespace {

uint64_t Nanos(Clock::time_point a, Clock::time_point b) {
  if (a == Clock::time_point{} || b < a) return 0;
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

}  // namespace

void FinishRequest(const ModelQueue& model, RequestPtr request, Status status,
                   std::vector<Value> outputs, int64_t) {
  RequestTimes& t = request->times;
  if (status.ok()) status = request->encode(outputs);
  t.finished = Clock::now();
  InferenceStats& s = model.stats();
  if (status.ok()) {
    s.success_count++;
    s.success_ns += Nanos(t.received, t.finished);
    s.queue_count++;
    s.queue_ns += Nanos(t.prepared, t.started);
    s.compute_input_ns += Nanos(t.received, t.prepared);
    s.compute_infer_ns += Nanos(t.started, t.computed);
    s.compute_output_ns += Nanos(t.computed, t.finished);
    s.last_inference_ms = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
  } else {
    s.fail_count++;
    s.fail_ns += Nanos(t.received, t.finished);
    // The model's own failures concern the operator; bad requests only the client.
    bool model_fault = status.code() == StatusCode::kInternal ||
                       (status.code() == StatusCode::kDeadlineExceeded && t.started != Clock::time_point{});
    if (model_fault || LogEnabled(LogLevel::kVerbose)) {
      Log(model_fault ? LogLevel::kWarning : LogLevel::kVerbose,
          "request '" + request->id + "' to " + model.manifest().name + " failed: " + status.ToString());
    }
  }
  request->reply(status);
}

void RecordExecution(const ModelQueue& model, int64_t rows) {
  model.stats().execution_count++;
  model.stats().inference_count += static_cast<uint64_t>(rows);
}

}  // namespace manypy
