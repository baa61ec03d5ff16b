// What the end-to-end tests of the supervisor read of processes through /proc:
// a whole file, a supervisor's serving child, whether a process still runs.
// Plain functions over /proc; thread-safe.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace manypy::testing {

/// The whole of `path` ("" when it cannot be read).
inline std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The only child of `pid` (the serving process of a supervisor), or -1.
inline pid_t ChildOf(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = -1;
  in >> child;
  return in ? child : -1;
}

/// Whether `pid` still runs (not gone, not a zombie).
inline bool Running(pid_t pid) {
  std::string stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

}  // namespace manypy::testing
