#include "interpreters/torch_version.h"

#include <cstdio>
#include <mutex>

#include "common/mutex.h"
#include "interpreters/python_error.h"
#include "interpreters/shim/shim_api.h"

namespace manypy {
namespace {
Mutex g_running_mu;
std::string g_running GUARDED_BY(g_running_mu);
}  // namespace

TorchVersion TorchVersion::Parse(const std::string& text) {
  TorchVersion v;
  int major, minor, used = 0;
  if (sscanf(text.c_str(), "%d.%d%n", &major, &minor, &used) == 2 && used > 0) {
    v.major = major;
    v.minor = minor;
  }
  return v;
}

Status CheckTorchVersion(const std::string& imported, const std::string& built_with) {
  TorchVersion v = TorchVersion::Parse(imported);
  if (v.major < 0) {
    return FailedPrecondition("torch.__version__ is '" + imported +
                              "', not a version manypy can check (expected N.N...)");
  }
  if (v < TorchVersion{1, 9} || !(v < TorchVersion{2, 9})) {
    return FailedPrecondition(
        "PyTorch " + imported +
        " is not supported: the interpreter pool needs 1.9 <= PyTorch < 2.9, the releases whose "
        "TensorImpl keeps a per-interpreter PyObject tag (c10/core/impl/PyObjectSlot.h); 2.9 made "
        "the Python interpreter process-global, so interpreters would share each tensor's PyObject");
  }
  TorchVersion b = TorchVersion::Parse(built_with);
  if (b.major != v.major || b.minor != v.minor) {
    return FailedPrecondition("the interpreters import PyTorch " + imported +
                              " but manypy was built against libtorch " + built_with +
                              ": rebuild manypy against this libtorch");
  }
  return Status::Ok();
}

Status CheckImportedTorch(shim::InterpreterShim& shim) {
  std::string version;
  try {
    shim::Handle h = shim.Eval("__import__('torch').__version__");
    version = shim.ToValue(h).to_str();
    shim.DecRef(h);
  } catch (const PythonError& e) {
    return FailedPrecondition(std::string("cannot read torch.__version__: ") + e.what());
  }
  return CheckReportedTorch(version);
}

Status CheckReportedTorch(const std::string& version) {
  Status status = CheckTorchVersion(version, BuiltTorchVersion());
  if (status.ok()) {
    MutexLock lock(g_running_mu);
    if (g_running.empty()) g_running = version;
  }
  return status;
}

const char* BuiltTorchVersion() { return MANYPY_TORCH_VERSION; }

std::string RunningTorchVersion() {
  MutexLock lock(g_running_mu);
  return g_running.empty() ? BuiltTorchVersion() : g_running;
}

}  // namespace manypy
