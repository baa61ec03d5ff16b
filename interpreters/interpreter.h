// Interpreter: one embedded CPython runtime with its private library copies,
// shim and arena cache. Thread-safe to share; its Python state may be touched
// only while holding its GIL (InterpreterSession does that).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/arena_cache.h"
#include "interpreters/image_preparer.h"
#include "interpreters/shim/shim_api.h"

namespace manypy {

class Interpreter {
 public:
  struct Options {
    int index = 0;
    bool owns_registrations = true;
    std::string python_executable;
    std::vector<std::string> extra_sys_path;
    std::vector<std::string> preload_modules;
    std::vector<std::string> lazy_modules;
    std::vector<std::string> lazy_functions;
    std::vector<std::string> lazy_values;
    bool arena_cache = true;
    /// PyTorch 2.x: called on the booting thread with torch.__version__ as
    /// soon as `import torch` has read it, before torch._C loads (the pool
    /// checks it there and lets the other interpreters start). Only during
    /// Start: never called once Start has returned.
    std::function<void(const std::string& version)> on_torch_version;
  };

  /// Prepares (or finds cached) library copies, loads them and boots Python.
  /// `preparer` must outlive the interpreter: imports call back into it.
  static StatusOr<std::unique_ptr<Interpreter>> Start(ImagePreparer* preparer,
                                                     const Options& options);
  /// Finalizes the runtime. No session may be open.
  ~Interpreter();

  shim::InterpreterShim& shim() const { return *shim_; }
  int index() const { return options_.index; }
  /// Its libtorch_python's c10::impl::PyInterpreter (PyTorch 2.x; else null).
  const void* torch_interpreter() const { return torch_interpreter_; }
  bool owns_registrations() const { return options_.owns_registrations; }
  /// Flushes sys.stdout and sys.stderr. No session may be open on this thread.
  void FlushOutput();
  /// This interpreter's cache of obmalloc arenas (null when
  /// Options::arena_cache is off).
  ArenaCache* arena_cache() const { return arenas_; }

 private:
  Interpreter(ImagePreparer* preparer, Options options) : preparer_(preparer), options_(options) {}
  Status Boot();  // runs on owner_
  /// HostCallbacks::call_host: runs the host service (host_services.h), or
  /// "pool.torch_version" (boot.py, during `import torch`): Options::on_torch_version.
  static bool CallHost(void* self, const char* service, const Value* request, Value* response,
                       std::string* error);
  static bool PrepareExtension(void* self, const char* module, const char* origin, char* out,
                               size_t out_len);
  /// HostCallbacks::torch_interpreter: routes Python kernels to this interpreter.
  static void AddTorchInterpreter(void* self, const void* py_interpreter,
                                  int (*thread_state)());

  // Constant after Start.
  ImagePreparer* const preparer_;
  const Options options_;
  int slot_ = -1;
  shim::InterpreterShim* shim_ = nullptr;
  const void* torch_interpreter_ = nullptr;  // its libtorch_python's PyInterpreter (2.x)
  // Options::on_torch_version until the boot ends (used and cleared on owner_).
  std::function<void(const std::string&)> on_torch_version_;
  // CPython expects the thread that initialised a runtime to finalise it (the
  // threading module waits for its "main thread" otherwise), so each
  // interpreter has an owner thread that boots it, sleeps, then finalises it.
  std::thread owner_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  // Deliberately never freed: after finalisation, stray Python objects owned
  // by libtorch may still be released into it at process exit.
  ArenaCache* arenas_ = nullptr;
};

}  // namespace manypy
