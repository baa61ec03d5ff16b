// Server logging: one line per event on stderr, filtered by --log-level.
// Thread-safe (each line is one write).
#pragma once

#include <string>

namespace manypy {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kVerbose = 3 };

/// Sets the most detailed level printed; "error", "warning", "info" or "verbose".
void SetLogLevel(const std::string& level);
bool LogEnabled(LogLevel level);
/// Prints "manypy-server: <LEVEL> message" if `level` is enabled.
void Log(LogLevel level, const std::string& message);

}  // namespace manypy
