// CrashRecord: the line the crash handler appends to STATE_DIR/crashes for a
// crash blamed on a model, and its parsing. Plain functions; the formatting
// one is async-signal-safe (no allocation), the parsing one is not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace manypy {

/// One crash: when (Unix seconds), which signal ("SIGSEGV"), which model version.
struct CrashRecord {
  int64_t time = 0;
  std::string signal;
  std::string model;
  int64_t version = 0;
};

/// The state folder's file of crash lines: "TIME\tSIGNAL\tMODEL\tVERSION\n".
constexpr const char* kCrashesFileName = "crashes";

/// Writes the line for a crash into `out` (at most `capacity` bytes, model
/// names cut to fit) and returns its length. Async-signal-safe.
size_t FormatCrashLine(char* out, size_t capacity, int64_t time, const char* signal,
                       const char* model, int64_t version);
/// The crash of one line; nullopt for a malformed one (a torn write, say).
std::optional<CrashRecord> ParseCrashLine(const std::string& line);

/// Writes `value` in decimal into `out` from `at` (stopping one byte short of
/// `capacity`) and returns the new end. Async-signal-safe.
size_t PutDecimal(char* out, size_t capacity, size_t at, int64_t value);

/// "SIGSEGV" for SIGSEGV, ...; "SIG?" for a signal without a name here. Async-signal-safe.
const char* SignalName(int signal);

}  // namespace manypy
