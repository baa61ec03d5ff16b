#include "server/log.h"

#include <unistd.h>

#include <atomic>

namespace manypy {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

const char* Name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kVerbose: return "VERBOSE";
  }
  return "?";
}

}  // namespace

void SetLogLevel(const std::string& level) {
  LogLevel l = level == "error"     ? LogLevel::kError
               : level == "warning" ? LogLevel::kWarning
               : level == "verbose" ? LogLevel::kVerbose
                                    : LogLevel::kInfo;
  g_level = static_cast<int>(l);
}

bool LogEnabled(LogLevel level) { return static_cast<int>(level) <= g_level.load(); }

void Log(LogLevel level, const std::string& message) {
  if (!LogEnabled(level)) return;
  std::string line = std::string("manypy-server: ") + Name(level) + " " + message + "\n";
  // One write per line, so lines from different threads never interleave.
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace manypy
