// Library logging: glog and c10 (libtorch's logging) sent to stderr and quieted
// while interpreters start. Kept apart from log.h, which links nothing, so
// that the launcher (supervisor/) logs without libtorch. Main's thread only.
#pragma once

#include <string>

namespace manypy {

/// Initializes glog (used by libtorch) to log to stderr, so it does not print
/// "Logging before InitGoogleLogging()". Call once, first thing in main.
void InitLibraryLogging(const char* argv0);

/// While alive, libtorch's glog warnings are dropped: starting interpreters
/// prints "Overriding a previously registered kernel ... aten::get_gradients"
/// once per extra interpreter (each loads its own libtorch_python copy, whose
/// static registrations run again; harmless). Logs one line with the time
/// taken instead. Not thread-safe: use on main's thread during startup.
class QuietLibraryWarnings {
 public:
  explicit QuietLibraryWarnings(std::string what);
  ~QuietLibraryWarnings();

 private:
  const std::string what_;
  const int saved_level_;      // glog's minloglevel
  const int saved_c10_level_;  // c10's caffe2_log_level
  const double start_;
};

}  // namespace manypy
