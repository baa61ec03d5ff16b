// Writes manypy-perf results: a CSV table and a JSON list with one record
// per step. Pure functions; thread-safe.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "clients/perf/step_stats.h"

namespace manypy::perf {

/// Header line plus one line per step.
void WriteCsv(const std::vector<StepSummary>& steps, std::ostream& out);

/// [{"concurrency", "request_rate", "infer_per_s", "requests_per_s", "p50_ms", "p90_ms",
///   "p95_ms", "p99_ms", "avg_ms", "requests", "successes", "errors", "errors_by_code",
///   "windows", "stable", "protocol"}, ...]
void WriteJson(const std::vector<StepSummary>& steps, std::ostream& out,
               const std::string& protocol = "grpc");

}  // namespace manypy::perf
