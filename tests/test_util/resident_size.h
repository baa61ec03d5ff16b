// The resident size of a process, for tests that check memory comes back.
// Reads /proc; thread-safe.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace manypy::testing {

/// A size field of /proc/PID/status ("VmRSS", "RssAnon", ...), in bytes; -1
/// if unreadable or absent.
inline int64_t StatusBytes(pid_t pid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return -1;
}

/// The resident size of process `pid` (VmRSS), in bytes; -1 if unreadable.
inline int64_t ResidentBytes(pid_t pid = getpid()) { return StatusBytes(pid, "VmRSS"); }

}  // namespace manypy::testing
