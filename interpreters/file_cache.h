// A disk cache of prepared files: content hashing, crash-safe atomic
// publication, and directory checks. Thread-safe; safe across processes
// (files appear only complete, by rename).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace manypy {

/// A 64-bit hash of a file's bytes, memoised per (path, inode, size, mtime).
StatusOr<uint64_t> HashFileContent(const std::string& path);

/// Mixes `text` into `seed` (for cache keys built from several parts).
uint64_t HashCombine(uint64_t seed, const std::string& text);

/// 16 lowercase hex digits.
std::string HexDigest(uint64_t value);

/// Creates `dir` (and parents) if needed and checks that it is a writable
/// directory; the error names the directory and the reason.
Status EnsureWritableDirectory(const std::string& dir);

/// If `final_path` exists returns OK at once. Otherwise calls `make` with a
/// unique temporary path in the same directory, and renames the result into
/// place only if `make` succeeded; a failed or interrupted attempt never
/// leaves a partial `final_path`. Concurrent callers may both build; the
/// contents are identical by construction, so the last rename wins harmlessly.
Status MaterializeAtomically(const std::string& final_path,
                             const std::function<Status(const std::string& tmp_path)>& make);

/// Copies a regular file, preserving its mode.
Status CopyFile(const std::string& from, const std::string& to);

/// Runs `program args...` (searched on PATH, no shell) and waits; the error
/// includes the command line and what it wrote to stderr.
Status RunProgram(const std::string& program, const std::vector<std::string>& args);

}  // namespace manypy
