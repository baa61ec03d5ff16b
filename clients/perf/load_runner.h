// LoadRunner: drives one model with closed-loop (fixed concurrency) or
// open-loop (fixed rate) traffic and measures it in windows until stable.
// Not thread-safe: one step at a time; it owns the sender threads of a step.
#pragma once

#include <chrono>

#include "clients/cpp/inference_client.h"
#include "clients/perf/perf_options.h"
#include "clients/perf/step_stats.h"

namespace manypy::perf {

class LoadRunner {
 public:
  /// `client` must outlive the runner.
  LoadRunner(const client::InferenceClient* client, client::InferInputs inputs,
             const PerfOptions& options);

  /// `concurrency` threads, each sending its next request when the last returns.
  StepSummary RunClosedLoop(int concurrency);
  /// Requests sent at `rate` per second by a pool of options.max_threads senders;
  /// latency counts from each request's scheduled time.
  StepSummary RunOpenLoop(double rate);

 private:
  using Clock = std::chrono::steady_clock;
  /// Sends one request and records its latency since `start`.
  void SendOne(Recorder* recorder, Clock::time_point start) const;
  /// Warm-up, then windows until two agree or max_windows; summarizes the last two.
  StepSummary Measure(Recorder* recorder, const std::string& label) const;

  const client::InferenceClient* const client_;
  const client::InferInputs inputs_;
  const PerfOptions options_;
  client::InferOptions infer_options_;
};

}  // namespace manypy::perf
