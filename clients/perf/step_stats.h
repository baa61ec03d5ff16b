// Completed-request records of a load step and their summary (throughput,
// latency percentiles, errors by code). Recorder is thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"

namespace manypy::perf {

/// One finished request: its latency and "OK" or the status code name; for
/// a stream (--streaming), also when its first response came and how many
/// responses it had.
struct RequestRecord {
  int64_t latency_ns;
  const char* code;
  int64_t first_response_ns = -1;  ///< -1: not a stream
  int64_t responses = 0;
};

/// What a Recorder collected since its last Take.
struct RecordedWindow {
  std::vector<RequestRecord> records;
  /// The first error message seen per status code: what a burst of failures
  /// said, which counts alone cannot tell.
  std::map<std::string, std::string> first_messages;
};

/// Collects records from the sender threads; the measuring thread takes them.
class Recorder {
 public:
  void Add(RequestRecord r) {
    MutexLock lock(mutex_);
    window_.records.push_back(r);
  }
  /// Add for a failed request, keeping its message if it is its code's first.
  void AddFailure(RequestRecord r, const std::string& message) {
    MutexLock lock(mutex_);
    window_.records.push_back(r);
    window_.first_messages.emplace(r.code, message);
  }
  /// Everything since the last Take.
  RecordedWindow Take() {
    MutexLock lock(mutex_);
    RecordedWindow out;
    std::swap(out, window_);
    return out;
  }

 private:
  Mutex mutex_;
  RecordedWindow window_ GUARDED_BY(mutex_);
};

/// The numbers reported for one step (or one window of it).
struct StepSummary {
  int concurrency = 0;        // closed loop level, or sender threads in open loop
  double request_rate = 0;    // open loop target (requests/s); 0 in closed loop
  double seconds = 0;         // measured time
  int64_t requests = 0;       // completed, successful or not
  int64_t successes = 0;
  int64_t errors = 0;
  std::map<std::string, int64_t> errors_by_code;
  std::map<std::string, std::string> error_messages;  // the first message per code
  double infer_per_s = 0;     // successes x batch size / seconds
  double requests_per_s = 0;  // requests / seconds
  double p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0, avg_ms = 0;
  int windows = 0;             // per step: windows measured; per window: its number, from 1
  bool stable = false;
  // Streams (--streaming): time to first response of the successful ones, and
  // every response received per second.
  bool streaming = false;
  int64_t responses = 0;
  double responses_per_s = 0;
  double first_response_p50_ms = 0, first_response_p99_ms = 0;
};

/// Summarizes `records` measured over `seconds`. Latencies are those of the
/// successful requests, or of the failed ones when none succeeded.
StepSummary Summarize(const std::vector<RequestRecord>& records, double seconds,
                      int64_t batch_size);

/// Summarize over consecutive windows taken together; error_messages keeps
/// each code's first message in window order.
StepSummary Summarize(const std::vector<const RecordedWindow*>& windows, double seconds,
                      int64_t batch_size);

}  // namespace manypy::perf
