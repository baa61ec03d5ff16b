#include "server/lifecycle/model_python_errors.h"

#include "server/lifecycle/archive_traceback.h"
#include "server/log.h"

namespace manypy {
namespace {

// The runtime raises these when the server's Python lacks what an archive
// needs: their messages name it, and no traceback helps the reader.
constexpr const char* kMissingModulesError = "manypy_model_runtime.MissingModulesError";
constexpr const char* kCompileToolchainError = "manypy_model_runtime.CompileToolchainError";

// The whole traceback, for whoever runs the server at --log-level verbose;
// messages carry only the archive's own frames (archive_traceback.h).
void LogTraceback(const std::string& what, const PythonError& e) {
  if (!LogEnabled(LogLevel::kVerbose) || e.traceback().empty()) return;
  Log(LogLevel::kVerbose, what + " raised " + e.what() + "\n" + e.traceback());
}

}  // namespace

Status LoadRaised(const std::string& archive_path, const PythonError& e) {
  if (e.type() == kMissingModulesError || e.type() == kCompileToolchainError) {
    return FailedPrecondition("loading " + archive_path + " failed: " + e.message());
  }
  LogTraceback("loading " + archive_path, e);
  return Internal("loading " + archive_path + " failed: " + e.what() +
                  DescribeArchiveFrames(e.traceback()));
}

Status ModelRaised(const std::string& model_name, const PythonError& e, std::string* error_type) {
  if (!e.from_python()) return Internal("model '" + model_name + "' failed: " + e.what());
  *error_type = e.type();
  // sys.exit() in a model ends that call, not the server: SystemExit is an
  // exception like any other until it reaches the top of a program, and a
  // model's forward is never that.
  const char* exit_note =
      e.type() == "SystemExit"
          ? " (the model called sys.exit; the server and this interpreter serve on)"
          : "";
  LogTraceback("model '" + model_name + "'", e);
  return Internal("model '" + model_name + "' raised " + e.what() +
                  DescribeArchiveFrames(e.traceback()) + exit_note);
}

}  // namespace manypy
