// Server logging: one line per event on stderr, filtered by --log-level, as
// text or JSON (--log-format), and the sampled access log (--access-log).
// Thread-safe (each line is one write).
#pragma once

#include <chrono>
#include <string>

namespace manypy {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3 };

/// Sets the most detailed level printed; "error", "warning", "info" or "verbose".
void SetLogLevel(const std::string& level);
/// "text" (default): "manypy-server: LEVEL message"; "json": one object per
/// line, {"ts": RFC 3339 UTC, "level", "msg"} plus any fields given.
void SetLogFormat(const std::string& format);
bool LogEnabled(LogLevel level);
/// Prints the message if `level` is enabled.
void Log(LogLevel level, const std::string& message);
/// As Log, with more fields for the JSON format (`"key": value, ...`, already
/// encoded); the text format has only `message`, which should carry them too.
void LogFields(LogLevel level, const std::string& message, const std::string& json_fields);

/// The fraction of requests the access log samples (0: off, 1: every one).
void SetAccessLogFraction(double fraction);
/// Whether this request is one of the sampled ones (cheap when off).
bool AccessLogSampled();
/// One access-log line (level INFO, always printed): `message` as text, or
/// JSON with `json_fields` (`"k": v, ...` without braces) added.
void LogAccess(const std::string& message, const std::string& json_fields);
/// `text` as a JSON string literal, quotes included.
std::string JsonString(const std::string& text);
/// "0.25": a duration in seconds as messages write it (shortest form, %g).
std::string FormatSeconds(std::chrono::microseconds duration);
/// "1.20": seconds with two decimals (load and unload times).
std::string FormatSecondsFixed(double seconds);

}  // namespace manypy
