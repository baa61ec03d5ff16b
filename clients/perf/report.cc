#include "clients/perf/report.h"

#include <iomanip>

namespace manypy::perf {

void WriteCsv(const std::vector<StepSummary>& steps, std::ostream& out) {
  out << "concurrency,request_rate,infer_per_s,requests_per_s,p50_ms,p90_ms,p95_ms,p99_ms,"
         "avg_ms,requests,errors,errors_by_code,windows,stable\n";
  out << std::fixed << std::setprecision(3);
  for (const StepSummary& s : steps) {
    std::string codes;
    for (const auto& [code, n] : s.errors_by_code) {
      codes += (codes.empty() ? "" : ";") + code + ":" + std::to_string(n);
    }
    out << s.concurrency << ',' << s.request_rate << ',' << s.infer_per_s << ','
        << s.requests_per_s << ',' << s.p50_ms << ',' << s.p90_ms << ',' << s.p95_ms << ','
        << s.p99_ms << ',' << s.avg_ms << ',' << s.requests << ',' << s.errors << ',' << codes
        << ',' << s.windows << ',' << (s.stable ? 1 : 0) << '\n';
  }
}

void WriteJson(const std::vector<StepSummary>& steps, std::ostream& out, const std::string& protocol) {
  out << std::fixed << std::setprecision(4) << "[";
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepSummary& s = steps[i];
    out << (i ? ",\n " : "\n ") << "{\"concurrency\": " << s.concurrency
        << ", \"request_rate\": " << s.request_rate << ", \"infer_per_s\": " << s.infer_per_s
        << ", \"requests_per_s\": " << s.requests_per_s << ", \"p50_ms\": " << s.p50_ms
        << ", \"p90_ms\": " << s.p90_ms << ", \"p95_ms\": " << s.p95_ms
        << ", \"p99_ms\": " << s.p99_ms << ", \"avg_ms\": " << s.avg_ms
        << ", \"requests\": " << s.requests << ", \"successes\": " << s.successes
        << ", \"errors\": " << s.errors << ", \"errors_by_code\": {";
    bool first = true;
    for (const auto& [code, n] : s.errors_by_code) {
      // Code names are upper-case identifiers: nothing to escape.
      out << (first ? "" : ", ") << '"' << code << "\": " << n;
      first = false;
    }
    out << "}, \"windows\": " << s.windows << ", \"stable\": " << (s.stable ? "true" : "false")
        << ", \"protocol\": \"" << protocol << "\"}";
  }
  out << "\n]\n";
}

}  // namespace manypy::perf
