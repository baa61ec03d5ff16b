#include "server/library_logging.h"

#include <c10/util/Logging.h>
#include <glog/logging.h>

#include <chrono>
#include <cstdio>

#include "server/log.h"

namespace manypy {
namespace {

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

void InitLibraryLogging(const char* argv0) {
  FLAGS_logtostderr = true;  // glog would otherwise write files under /tmp
  if (!google::IsGoogleLoggingInitialized()) google::InitGoogleLogging(argv0);
}

// torch's module init (in each interpreter) lowers glog's minloglevel to c10's
// caffe2_log_level: both are raised while interpreters start.
QuietLibraryWarnings::QuietLibraryWarnings(std::string what)
    : what_(std::move(what)),
      saved_level_(FLAGS_minloglevel),
      saved_c10_level_(FLAGS_caffe2_log_level),
      start_(NowSeconds()) {
  FLAGS_minloglevel = google::GLOG_ERROR;
  FLAGS_caffe2_log_level = google::GLOG_ERROR;
}

QuietLibraryWarnings::~QuietLibraryWarnings() {
  FLAGS_minloglevel = saved_level_;
  FLAGS_caffe2_log_level = saved_c10_level_;
  char text[32];
  snprintf(text, sizeof(text), "%.2f", NowSeconds() - start_);
  Log(LogLevel::kInfo, what_ + " in " + text +
                           " s (libtorch's warnings meanwhile silenced: each extra interpreter's "
                           "libtorch_python copy re-registers aten::get_gradients, harmlessly)");
}

}  // namespace manypy
