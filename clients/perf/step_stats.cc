#include "clients/perf/step_stats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace manypy::perf {
namespace {

// Nearest-rank percentile of sorted values, in ms.
double Percentile(const std::vector<int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  rank = std::min(std::max<size_t>(rank, 1), sorted.size());
  return sorted[rank - 1] / 1e6;
}

}  // namespace

StepSummary Summarize(const std::vector<RequestRecord>& records, double seconds,
                      int64_t batch_size) {
  StepSummary s;
  s.seconds = seconds;
  std::vector<int64_t> ok, failed, first;
  for (const RequestRecord& r : records) {
    if (r.first_response_ns >= 0) {
      s.streaming = true;
      s.responses += r.responses;
    }
    if (strcmp(r.code, "OK") == 0) {
      ok.push_back(r.latency_ns);
      if (r.first_response_ns >= 0) first.push_back(r.first_response_ns);
    } else {
      failed.push_back(r.latency_ns);
      ++s.errors_by_code[r.code];
    }
  }
  s.requests = static_cast<int64_t>(records.size());
  s.successes = static_cast<int64_t>(ok.size());
  s.errors = static_cast<int64_t>(failed.size());
  if (seconds > 0) {
    s.infer_per_s = s.successes * batch_size / seconds;
    s.requests_per_s = s.requests / seconds;
    s.responses_per_s = s.responses / seconds;
  }
  std::sort(first.begin(), first.end());
  s.first_response_p50_ms = Percentile(first, 50);
  s.first_response_p99_ms = Percentile(first, 99);
  std::vector<int64_t>& latencies = ok.empty() ? failed : ok;
  std::sort(latencies.begin(), latencies.end());
  s.p50_ms = Percentile(latencies, 50);
  s.p90_ms = Percentile(latencies, 90);
  s.p95_ms = Percentile(latencies, 95);
  s.p99_ms = Percentile(latencies, 99);
  double total = 0;
  for (int64_t l : latencies) total += l;
  s.avg_ms = latencies.empty() ? 0 : total / latencies.size() / 1e6;
  return s;
}

StepSummary Summarize(const std::vector<const RecordedWindow*>& windows, double seconds,
                      int64_t batch_size) {
  std::vector<RequestRecord> all;
  for (const RecordedWindow* w : windows) all.insert(all.end(), w->records.begin(), w->records.end());
  StepSummary s = Summarize(all, seconds, batch_size);
  for (const RecordedWindow* w : windows) {
    for (const auto& [code, message] : w->first_messages) s.error_messages.emplace(code, message);
  }
  return s;
}

}  // namespace manypy::perf
