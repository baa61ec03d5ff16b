#include "interpreters/torch_version.h"

#include <cstdio>
#include <mutex>
#include <sstream>

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
  if (v < TorchVersion{1, 9}) {
    return FailedPrecondition(
        "PyTorch " + imported +
        " is not supported: the interpreter pool needs PyTorch >= 1.9, whose TensorImpl keeps a "
        "per-interpreter PyObject tag (c10/core/impl/PyObjectSlot.h)");
  }
  TorchVersion b = TorchVersion::Parse(built_with);
  if (!(v < TorchVersion{2, 9}) && b < TorchVersion{2, 9}) {
    // The routing that 2.9 and later need is built only against such a
    // libtorch (interpreters/CMakeLists.txt, global_py_interpreter.h).
    return FailedPrecondition(
        "PyTorch " + imported + " is not supported by this build of manypy: from 2.9 on libtorch "
        "has one process-global Python interpreter (c10::impl::getGlobalPyInterpreter) instead of "
        "a per-interpreter PyObject tag on TensorImpl, and manypy routes each object to its "
        "interpreter only when built against such a libtorch (this one: " + built_with +
        "): rebuild manypy against this libtorch");
  }
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

bool IsTestedTorch(const std::string& version, const std::string& tested) {
  TorchVersion v = TorchVersion::Parse(version);
  std::istringstream releases(tested);
  std::string release;
  while (std::getline(releases, release, ',')) {
    TorchVersion t = TorchVersion::Parse(release.substr(release.find_first_not_of(' ')));
    if (t.major == v.major && t.minor == v.minor && v.major >= 0) return true;
  }
  return false;
}

Status CheckReportedTorch(const std::string& version) {
  Status status = CheckTorchVersion(version, BuiltTorchVersion());
  if (status.ok()) {
    MutexLock lock(g_running_mu);
    if (g_running.empty()) {
      g_running = version;
      // Only a build configured with MANYPY_ALLOW_UNTESTED_TORCH=ON gets here
      // with such a version (CMakeLists.txt); said once per process.
      if (!IsTestedTorch(version, TestedTorchVersions())) {
        fprintf(stderr,
                "manypy: warning: PyTorch %s is not a release manypy is tested on (%s); this build "
                "was configured with MANYPY_ALLOW_UNTESTED_TORCH=ON\n",
                version.c_str(), TestedTorchVersions());
      }
    }
  }
  return status;
}

const char* TestedTorchVersions() { return MANYPY_TESTED_TORCH; }

const char* BuiltTorchVersion() { return MANYPY_TORCH_VERSION; }

std::string RunningTorchVersion() {
  MutexLock lock(g_running_mu);
  return g_running.empty() ? BuiltTorchVersion() : g_running;
}

}  // namespace manypy
