// The boundary between the host and one interpreter's private copy of the shim
// library (the only code that includes Python.h). No Python types cross it:
// objects are opaque Handles, data is Value, errors are PythonError.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "interpreters/value.h"

namespace manypy::shim {

/// An owned (strong) reference to a Python object in one interpreter.
using Handle = void*;
using Kwargs = std::vector<std::pair<std::string, Value>>;

/// Host services the interpreter calls back into. Plain function pointers:
/// the shim is a separately loaded object and shares no C++ state with the host.
struct HostCallbacks {
  void* context = nullptr;
  /// Returns the prepared per-interpreter copy of an extension module at
  /// `origin` into `out` (capacity out_len). On failure writes the reason and returns false.
  bool (*prepare_extension)(void* context, const char* module, const char* origin, char* out,
                            size_t out_len) = nullptr;
  /// A request from the interpreter's Python to the host
  /// (`_manypy.call_host(service, request)`), made with the interpreter's GIL
  /// released: fills `response` and returns true, or writes "CODE: message"
  /// (a status code name) to `error` and returns false.
  bool (*call_host)(void* context, const char* service, const Value* request, Value* response,
                    std::string* error) = nullptr;
  /// PyTorch 2.x (python_kernels.h), before Python starts: this interpreter's
  /// c10::impl::PyInterpreter and a function that says what the calling
  /// thread has in this interpreter (2 its GIL, 1 a thread state, 0 nothing).
  void (*torch_interpreter)(void* context, const void* py_interpreter,
                            int (*thread_state)()) = nullptr;
  /// PyTorch 2.x: the next Python kernel this thread registers takes the
  /// dispatch key set first (torch.library's with_keyset).
  void (*next_python_kernel_with_keyset)(bool with_keyset) = nullptr;
  /// PyTorch 2.x: 1 if `py_interpreter` registered a Python kernel for
  /// operator `op` and dispatch key `key`, 0 if only other interpreters did, -1 if none did.
  int (*python_kernel_registered_by)(const char* op, const char* key,
                                     const void* py_interpreter) = nullptr;
  /// obmalloc arena hooks (PyObjectArenaAllocator), context = arena_context.
  void* arena_context = nullptr;
  void* (*arena_alloc)(void* context, size_t size) = nullptr;
  void (*arena_free)(void* context, void* ptr, size_t size) = nullptr;
};

struct ShimConfig {
  int index = 0;                 ///< interpreter index in its pool; 0 makes global registrations
  /// PyTorch 1.x: may make process-global torch.library registrations (2.x:
  /// every interpreter registers its own Python kernels, python_kernels.h).
  bool owns_registrations = true;
  std::string python_executable;   ///< used to compute sys.prefix (Debian's /usr/bin/python3)
  std::vector<std::string> extra_sys_path;
  std::vector<std::string> preload_modules;  ///< imported at boot, in order
  std::vector<std::string> lazy_modules;     ///< imported lazily (boot.py)
  std::vector<std::string> lazy_functions;   ///< "module.function" deferred to first call (boot.py)
  std::vector<std::string> lazy_values;      ///< "module.name" deferred to first use (boot.py)
  HostCallbacks callbacks;
};

/// One live interpreter. Every method except AcquireGil/ReleaseGil/Finalize
/// requires the calling thread to hold this interpreter's GIL (via AcquireGil).
class InterpreterShim {
 public:
  virtual ~InterpreterShim() = default;

  /// Takes the GIL for the calling thread (reentrant); returns a token for ReleaseGil.
  virtual int AcquireGil() = 0;
  virtual void ReleaseGil(int token) = 0;

  virtual Handle Import(const std::string& module) = 0;
  virtual Handle GetAttr(Handle object, const std::string& name) = 0;
  virtual bool HasAttr(Handle object, const std::string& name) = 0;
  virtual Handle Call(Handle callable, const std::vector<Handle>& args, const Kwargs& kwargs) = 0;
  virtual Handle FromValue(const Value& value) = 0;
  virtual Value ToValue(Handle object) = 0;
  /// Runs statements in the interpreter's __main__ namespace.
  virtual void Exec(const std::string& source) = 0;
  /// Evaluates an expression in __main__.
  virtual Handle Eval(const std::string& expression) = 0;
  virtual std::string Repr(Handle object) = 0;
  virtual void IncRef(Handle object) = 0;
  virtual void DecRef(Handle object) = 0;

  /// Makes the calling thread's Python code interruptible by Interrupt(token)
  /// until EndInterruptible(token); returns a token never used before.
  virtual uint64_t BeginInterruptible() = 0;
  /// Ends the scope and discards an interrupt that has not fired yet.
  virtual void EndInterruptible(uint64_t token) = 0;
  /// Schedules _manypy.ExecutionInterrupted (a BaseException) in the thread
  /// whose scope `token` is, if that scope is still open; returns whether it was.
  virtual bool Interrupt(uint64_t token) = 0;

  /// Tears the interpreter down. The caller must not hold the GIL; no other
  /// thread may use the interpreter during or after this call.
  virtual void Finalize() = 0;
};

/// The single entry point exported by the shim library.
/// Returns nullptr and writes the reason into `error` on failure.
using CreateFn = InterpreterShim* (*)(const ShimConfig* config, std::string* error);
inline constexpr const char* kCreateSymbol = "manypy_shim_create";

}  // namespace manypy::shim
