// Opening a benchmark's JSON output file. Header-only; thread-compatible.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

namespace manypy::bench {

/// Opens `path` for writing, creating its parent folders; nullptr on failure.
inline FILE* OpenOutputFile(const std::string& path) {
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  return fopen(path.c_str(), "w");
}

}  // namespace manypy::bench
