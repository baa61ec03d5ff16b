// The resident size of a process, for tests that check memory comes back.
// Reads /proc; thread-safe.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace manypy::testing {

/// The resident size of process `pid` (VmRSS), in bytes; -1 if unreadable.
inline int64_t ResidentBytes(pid_t pid = getpid()) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

}  // namespace manypy::testing
