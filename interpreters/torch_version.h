// Which PyTorch versions the pool can be safe on, checked once per process on
// the torch that interpreter 0 imports. Pure functions; thread-safe.
// Interpreter 0's GIL must be held for CheckImportedTorch's shim calls.
#pragma once

#include <string>

#include "common/status.h"

namespace manypy {

namespace shim {
class InterpreterShim;
}  // namespace shim

/// "2.6.0+debian" -> {2, 6}; {-1, -1} when it does not start with N.N.
struct TorchVersion {
  int major = -1;
  int minor = -1;
  static TorchVersion Parse(const std::string& text);
  bool operator<(const TorchVersion& o) const {
    return major != o.major ? major < o.major : minor < o.minor;
  }
};

/// Ok for 1.9 <= version: 1.9 .. 2.8 keep the per-interpreter PyObject tag
/// on TensorImpl (c10/core/impl/PyObjectSlot.h) the pool relies on there;
/// from 2.9 on the host routes libtorch's one global Python interpreter
/// (global_py_interpreter.h), built only against such a libtorch. Otherwise
/// FailedPrecondition naming the version and why. `built_with` is the
/// libtorch version manypy was compiled against; a different major.minor at
/// run time is refused too (the host and libtorch_python's copies would
/// disagree on the C++ ABI).
Status CheckTorchVersion(const std::string& imported, const std::string& built_with);

/// torch.__version__ in the interpreter behind `shim`, checked as above
/// against the libtorch this program was built with (MANYPY_TORCH_VERSION).
Status CheckImportedTorch(shim::InterpreterShim& shim);

/// The same check of a torch.__version__ an interpreter reported while
/// importing torch (Interpreter::Options::on_torch_version); no GIL needed.
/// Ok records it as RunningTorchVersion(), as CheckImportedTorch does, and
/// warns on stderr (once) when it is not a release manypy is tested on.
Status CheckReportedTorch(const std::string& version);

/// Whether `version`'s major.minor is one of `tested` ("1.13, 2.6, 2.14").
bool IsTestedTorch(const std::string& version, const std::string& tested);

/// The releases the suite runs on, as CMakeLists.txt names them ("1.13, 2.6, 2.14").
const char* TestedTorchVersions();

/// The libtorch version this program was built with ("1.13.0", "2.6.0").
const char* BuiltTorchVersion();

/// torch.__version__ as the first pool's interpreter 0 imported it ("1.13.1",
/// "2.6.0+debian"); BuiltTorchVersion() before any pool has started.
std::string RunningTorchVersion();

}  // namespace manypy
