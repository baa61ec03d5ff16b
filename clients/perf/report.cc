#include "clients/perf/report.h"

#include <cstdio>
#include <iomanip>

namespace manypy::perf {

void WriteCsv(const std::vector<StepSummary>& steps, std::ostream& out) {
  bool streaming = !steps.empty() && steps.front().streaming;
  out << "concurrency,request_rate,infer_per_s,requests_per_s,p50_ms,p90_ms,p95_ms,p99_ms,"
         "avg_ms,requests,errors,errors_by_code,windows,stable"
      << (streaming ? ",responses_per_s,first_response_p50_ms,first_response_p99_ms" : "") << "\n";
  out << std::fixed << std::setprecision(3);
  for (const StepSummary& s : steps) {
    std::string codes;
    for (const auto& [code, n] : s.errors_by_code) {
      codes += (codes.empty() ? "" : ";") + code + ":" + std::to_string(n);
    }
    out << s.concurrency << ',' << s.request_rate << ',' << s.infer_per_s << ','
        << s.requests_per_s << ',' << s.p50_ms << ',' << s.p90_ms << ',' << s.p95_ms << ','
        << s.p99_ms << ',' << s.avg_ms << ',' << s.requests << ',' << s.errors << ',' << codes
        << ',' << s.windows << ',' << (s.stable ? 1 : 0);
    if (streaming) {
      out << ',' << s.responses_per_s << ',' << s.first_response_p50_ms << ','
          << s.first_response_p99_ms;
    }
    out << '\n';
  }
}

namespace {

// A JSON string literal: error messages are free text from servers.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      snprintf(escaped, sizeof escaped, "\\u%04x", c);
      out += escaped;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// One step's (or window's) record, without the enclosing braces' neighbours.
void WriteRecord(const StepSummary& s, std::ostream& out, const std::string& protocol) {
  out << "{\"concurrency\": " << s.concurrency << ", \"request_rate\": " << s.request_rate
      << ", \"infer_per_s\": " << s.infer_per_s << ", \"requests_per_s\": " << s.requests_per_s
      << ", \"seconds\": " << s.seconds << ", \"p50_ms\": " << s.p50_ms
      << ", \"p90_ms\": " << s.p90_ms << ", \"p95_ms\": " << s.p95_ms
      << ", \"p99_ms\": " << s.p99_ms << ", \"avg_ms\": " << s.avg_ms
      << ", \"requests\": " << s.requests << ", \"successes\": " << s.successes
      << ", \"errors\": " << s.errors << ", \"errors_by_code\": {";
  bool first = true;
  for (const auto& [code, n] : s.errors_by_code) {
    out << (first ? "" : ", ") << Quoted(code) << ": " << n;
    first = false;
  }
  out << "}, \"error_messages\": {";
  first = true;
  for (const auto& [code, message] : s.error_messages) {
    out << (first ? "" : ", ") << Quoted(code) << ": " << Quoted(message);
    first = false;
  }
  out << "}, \"windows\": " << s.windows << ", \"stable\": " << (s.stable ? "true" : "false")
      << ", \"protocol\": " << Quoted(protocol);
  if (s.streaming) {
    out << ", \"streaming\": true, \"responses\": " << s.responses
        << ", \"responses_per_s\": " << s.responses_per_s
        << ", \"first_response_p50_ms\": " << s.first_response_p50_ms
        << ", \"first_response_p99_ms\": " << s.first_response_p99_ms;
  }
  out << "}";
}

}  // namespace

void WriteJson(const std::vector<StepSummary>& steps, std::ostream& out, const std::string& protocol) {
  out << std::fixed << std::setprecision(4) << "[";
  for (size_t i = 0; i < steps.size(); ++i) {
    out << (i ? ",\n " : "\n ");
    WriteRecord(steps[i], out, protocol);
  }
  out << "\n]\n";
}

void WriteJsonLine(const StepSummary& window, std::ostream& out, const std::string& protocol) {
  out << std::fixed << std::setprecision(4);
  WriteRecord(window, out, protocol);
  out << "\n";
  out.flush();
}

}  // namespace manypy::perf
