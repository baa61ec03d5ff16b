#include "server/crash/crash_record.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>

namespace manypy {
namespace {

size_t Put(char* out, size_t capacity, size_t at, const char* text) {
  while (*text != '\0' && at + 1 < capacity) out[at++] = *text++;
  return at;
}

}  // namespace

size_t PutDecimal(char* out, size_t capacity, size_t at, int64_t value) {
  char digits[24];
  size_t n = 0;
  uint64_t v = value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  if (value < 0 && at + 1 < capacity) out[at++] = '-';
  while (n > 0 && at + 1 < capacity) out[at++] = digits[--n];
  return at;
}

size_t FormatCrashLine(char* out, size_t capacity, int64_t time, const char* signal,
                       const char* model, int64_t version) {
  if (capacity == 0) return 0;
  // Room for the fields after the name, so a long name is cut, never the line.
  const size_t tail = 32;
  size_t at = PutDecimal(out, capacity, 0, time);
  at = Put(out, capacity, at, "\t");
  at = Put(out, capacity, at, signal);
  at = Put(out, capacity, at, "\t");
  for (const char* c = model; *c != '\0' && at + tail < capacity; ++c) {
    out[at++] = (*c == '\t' || *c == '\n') ? '_' : *c;  // model names have neither
  }
  at = Put(out, capacity, at, "\t");
  at = PutDecimal(out, capacity, at, version);
  at = Put(out, capacity, at, "\n");
  out[at] = '\0';
  return at;
}

std::optional<CrashRecord> ParseCrashLine(const std::string& line) {
  size_t a = line.find('\t');
  size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
  size_t c = b == std::string::npos ? b : line.find('\t', b + 1);
  if (c == std::string::npos || line.find('\t', c + 1) != std::string::npos) return std::nullopt;
  CrashRecord r;
  char* end = nullptr;
  r.time = strtoll(line.c_str(), &end, 10);
  if (end != line.c_str() + a || a == 0) return std::nullopt;
  r.signal = line.substr(a + 1, b - a - 1);
  r.model = line.substr(b + 1, c - b - 1);
  const char* v = line.c_str() + c + 1;
  r.version = strtoll(v, &end, 10);
  if (end == v || *end != '\0' || r.model.empty() || r.signal.empty()) return std::nullopt;
  return r;
}

const char* SignalName(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGKILL: return "SIGKILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    case SIGPIPE: return "SIGPIPE";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGTRAP: return "SIGTRAP";
    case SIGSYS: return "SIGSYS";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "SIG?";
  }
}

}  // namespace manypy
