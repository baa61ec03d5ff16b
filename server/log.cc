#include "server/log.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace manypy {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<bool> g_json{false};
std::atomic<uint64_t> g_access_every{0};  // log one request in this many; 0: none
std::atomic<uint64_t> g_access_seen{0};

const char* Name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kVerbose: return "VERBOSE";
  }
  return "?";
}

std::string Timestamp() {
  auto now = std::chrono::system_clock::now();
  time_t seconds = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  tm utc{};
  gmtime_r(&seconds, &utc);
  char text[64];
  snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900,
           utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(ms));
  return text;
}

void Write(LogLevel level, const std::string& message, const std::string& json_fields) {
  std::string line;
  if (g_json.load()) {
    line = "{\"ts\": \"" + Timestamp() + "\", \"level\": \"" + Name(level) +
           "\", \"msg\": " + JsonString(message) +
           (json_fields.empty() ? "" : ", " + json_fields) + "}\n";
  } else {
    line = std::string("manypy-server: ") + Name(level) + " " + message + "\n";
  }
  // One write per line, so lines from different threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace

void SetLogLevel(const std::string& level) {
  LogLevel l = level == "error"     ? LogLevel::kError
               : level == "warning" ? LogLevel::kWarning
               : level == "verbose" ? LogLevel::kVerbose
                                    : LogLevel::kInfo;
  g_level = static_cast<int>(l);
}

void SetLogFormat(const std::string& format) { g_json = format == "json"; }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void Log(LogLevel level, const std::string& message) {
  if (LogEnabled(level)) Write(level, message, "");
}

void SetAccessLogFraction(double fraction) {
  g_access_every = fraction <= 0 ? 0 : static_cast<uint64_t>(std::llround(1 / fraction));
}

bool AccessLogSampled() {
  uint64_t every = g_access_every.load(std::memory_order_relaxed);
  if (every == 0) return false;
  return g_access_seen.fetch_add(1, std::memory_order_relaxed) % every == 0;
}

void LogFields(LogLevel level, const std::string& message, const std::string& json_fields) {
  if (!LogEnabled(level)) return;
  Write(level, message, json_fields);
}

void LogAccess(const std::string& message, const std::string& json_fields) {
  Write(LogLevel::kInfo, message, json_fields);
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char esc[8];
          snprintf(esc, sizeof(esc), "\\u%04x", c);
          out += esc;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string FormatSeconds(std::chrono::microseconds duration) {
  char text[32];
  snprintf(text, sizeof(text), "%g", std::chrono::duration<double>(duration).count());
  return text;
}

std::string FormatSecondsFixed(double seconds) {
  char text[32];
  snprintf(text, sizeof(text), "%.2f", seconds);
  return text;
}

}  // namespace manypy
