// Writes manypy-perf results: a CSV table, a JSON list with one record per
// step, and JSON Lines with one record per window. Pure functions; thread-safe.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "clients/perf/step_stats.h"

namespace manypy::perf {

/// Header line plus one line per step.
void WriteCsv(const std::vector<StepSummary>& steps, std::ostream& out);

/// [{"concurrency", "request_rate", "infer_per_s", "requests_per_s", "seconds", "p50_ms",
///   "p90_ms", "p95_ms", "p99_ms", "avg_ms", "requests", "successes", "errors",
///   "errors_by_code", "error_messages" (the first message per code), "windows",
///   "stable", "protocol"}, ...]
void WriteJson(const std::vector<StepSummary>& steps, std::ostream& out,
               const std::string& protocol = "grpc");

/// One window's record (same fields; "windows" is the window's number in its
/// step, from 1) on one line, flushed: --window-log's JSON Lines.
void WriteJsonLine(const StepSummary& window, std::ostream& out,
                   const std::string& protocol = "grpc");

}  // namespace manypy::perf
