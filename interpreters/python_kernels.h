// Operators whose kernels are Python functions registered with torch.library
// by any interpreter (PyTorch 2.x): each runs, in the interpreter that calls
// it, the kernel that interpreter registered. Thread-safe; no GIL needed.
#pragma once

#include <string>

namespace manypy {

struct PythonKernelCounts {
  int routes = 0;         ///< (operator, dispatch key) pairs the dispatcher routes
  int registrations = 0;  ///< kernels registered, summed over the interpreters
  int definitions = 0;    ///< operator schemas defined from Python
  int same_definitions = 0;  ///< schema definitions that repeated an identical one
};

/// What has been registered so far (all 0 on PyTorch 1.x, which routes nothing).
PythonKernelCounts PythonKernels();

/// Called by each interpreter before it boots: `py_interpreter` is its
/// libtorch_python copy's c10::impl::PyInterpreter; `thread_state` says what
/// the calling thread has in that interpreter: 2 its GIL, 1 a thread state
/// (it ran Python there and let the GIL go), 0 nothing. Removed before the
/// interpreter finalizes.
void AddTorchInterpreter(const void* py_interpreter, int (*thread_state)());
void RemoveTorchInterpreter(const void* py_interpreter);

/// The calling thread runs Python in `py_interpreter` from now on (a session
/// opened on it; null: none); returns the one it ran in before, which the
/// session gives back when it closes. A kernel called with the GIL let go
/// (torch calls operators so) belongs to this interpreter; a thread without
/// a session, one Python started, to the interpreter it has a state in.
const void* SetCallingInterpreter(const void* py_interpreter);

/// The next Python kernel this thread registers takes the calling dispatch
/// key set as its first argument (torch.library's with_keyset=True).
void SetNextPythonKernelWithKeyset(bool with_keyset);

/// Whether `py_interpreter` registered a Python kernel for `op` ("ns::name" or
/// "ns::name.overload") and `dispatch_key` (its name): 1 yes, 0 only other
/// interpreters did, -1 no interpreter registered one from Python.
int PythonKernelRegisteredBy(const std::string& op, const std::string& dispatch_key,
                             const void* py_interpreter);

/// Names, while it lives, what defines operators from Python on this thread
/// (a model being loaded, say), so that a conflicting definition is refused
/// naming both definers. Nests: the innermost name applies.
class ScopedOperatorDefiner {
 public:
  explicit ScopedOperatorDefiner(std::string name);
  ~ScopedOperatorDefiner();
  ScopedOperatorDefiner(const ScopedOperatorDefiner&) = delete;
  ScopedOperatorDefiner& operator=(const ScopedOperatorDefiner&) = delete;

 private:
  std::string previous_;
};

}  // namespace manypy
