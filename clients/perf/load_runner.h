// LoadRunner: drives one model with closed-loop (fixed concurrency) or
// open-loop (fixed rate) traffic and measures it in windows until stable.
// Not thread-safe: one step at a time; it owns the sender threads of a step.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <vector>

#include "clients/perf/perf_options.h"
#include "clients/perf/step_stats.h"

namespace manypy::perf {

/// What a stream's sender tells of it besides its status.
struct SendFigures {
  /// When its first response arrived (-1: it had none, or it is not a stream).
  std::chrono::steady_clock::time_point first_response{};
  int64_t responses = -1;  ///< -1: not a stream
};
/// Sends one request and waits for its reply: the reply's status. A stream's
/// sender (--streaming) also fills its figures. Called from its one sender
/// thread only, so it may keep state (which input set its next request sends).
using Sender = std::function<Status(SendFigures*)>;
/// Makes the sender of sender thread `worker` (0 to the step's thread count - 1;
/// it picks the input sets its requests send, InputSetFor) (gRPC: a call on a
/// client with a connection of its own, already connected; HTTP: a connection
/// of its own).
using SenderFactory = std::function<Sender(int worker)>;
/// Called with each window's figures as the window closes (measuring thread).
using WindowObserver = std::function<void(const StepSummary&)>;
/// A closed loop driven from one thread (--async, async_grpc_load.h) instead
/// of a thread per stream: `connect` makes `concurrency` streams before
/// anything is measured; `run` then keeps one request in flight on each,
/// recording each, until the flag is set, and returns when none is left.
struct ClosedLoopDriver {
  std::function<Status(int concurrency)> connect;
  std::function<void(Recorder*, const std::atomic<bool>& stop)> run;
};

class LoadRunner {
 public:
  LoadRunner(SenderFactory senders, const PerfOptions& options)
      : senders_(std::move(senders)), options_(options) {}

  /// `concurrency` threads, each sending its next request when the last returns
  /// (with a closed-loop driver: `concurrency` requests in flight from its one thread).
  StepSummary RunClosedLoop(int concurrency);
  /// Requests sent at `rate` per second by a pool of options.max_threads senders;
  /// latency counts from each request's scheduled time.
  StepSummary RunOpenLoop(double rate);

  /// Every measured window, besides the step's summary (--window-log).
  void set_window_observer(WindowObserver observer) { observer_ = std::move(observer); }
  /// Closed-loop steps through `driver` from here on (--async).
  void set_closed_loop_driver(ClosedLoopDriver driver) { driver_ = std::move(driver); }

 private:
  using Clock = std::chrono::steady_clock;
  /// `count` senders, made one after another before any is used: a sender's
  /// connection is set up then, before the warm-up and the windows start.
  std::vector<Sender> MakeSenders(int count) const;
  /// Sends one request and records its latency since `start`.
  static void SendOne(const Sender& send, Recorder* recorder, Clock::time_point start);
  /// Warm-up, then windows until two agree or max_windows; summarizes the last
  /// two. `concurrency` and `rate` label the step and each window the observer sees.
  StepSummary Measure(Recorder* recorder, const std::string& label, int concurrency,
                      double rate) const;

  const SenderFactory senders_;
  const PerfOptions options_;
  WindowObserver observer_;
  ClosedLoopDriver driver_;  // set: closed loops through it
};

}  // namespace manypy::perf
