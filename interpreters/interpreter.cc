#include "interpreters/interpreter.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <future>

#include "interpreters/host_services.h"
#include "interpreters/python_kernels.h"
#if MANYPY_TORCH_GLOBAL_INTERPRETER
#include "interpreters/global_py_interpreter.h"
#endif

namespace manypy {

namespace {
// boot.py's report of torch.__version__ while `import torch` runs (PyTorch 2.x).
constexpr const char* kTorchVersionService = "pool.torch_version";

#if MANYPY_TORCH_GLOBAL_INTERPRETER
// The runtime Boot is loading on this (its owner) thread, for AddTorchInterpreter.
struct BootingRuntime {
  const void* type_type = nullptr;
  void* (*save_thread)() = nullptr;
  void (*restore_thread)(void*) = nullptr;
};
thread_local BootingRuntime t_booting;
#endif
}  // namespace

StatusOr<std::unique_ptr<Interpreter>> Interpreter::Start(ImagePreparer* preparer,
                                                         const Options& options) {
  std::unique_ptr<Interpreter> interp(new Interpreter(preparer, options));
  std::promise<Status> booted;
  Interpreter* self = interp.get();
  interp->owner_ = std::thread([self, &booted] {
    Status status = self->Boot();
    bool ok = status.ok();
    booted.set_value(std::move(status));
    if (!ok) return;
    MutexLock lock(self->mu_);
    self->cv_.wait(lock.native(), [self]() REQUIRES(self->mu_) { return self->stop_; });
    lock.Unlock();
#if MANYPY_TORCH_GLOBAL_INTERPRETER
    if (self->torch_interpreter_ != nullptr) LeaveGlobalPyInterpreter(self->torch_interpreter_);
#endif
    if (self->torch_interpreter_ != nullptr) RemoveTorchInterpreter(self->torch_interpreter_);
    self->shim_->Finalize();
    if (self->arenas_ != nullptr) self->arenas_->Drain();
  });
  Status status = booted.get_future().get();
  if (!status.ok()) {
    interp->owner_.join();
    return status;
  }
  return interp;
}

Status Interpreter::Boot() {
  slot_ = ImagePreparer::NewSlot();
  auto image = preparer_->PrepareInterpreter(slot_);
  if (!image.ok()) return image.status();

#if MANYPY_TORCH_GLOBAL_INTERPRETER
  // Before this interpreter's copy of libtorch_python loads (with the shim).
  if (Status hooks = InstallGlobalPyInterpreter(); !hooks.ok()) return hooks;
#endif
  // RTLD_LOCAL: this runtime's symbols stay out of the global scope, so the
  // next interpreter's copies bind to their own libpython, not this one.
  // The handles are never closed: libtorch keeps pointers into these copies.
  void* libpython = dlopen(image->libpython.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (libpython == nullptr) {
    return Internal("cannot load interpreter " + std::to_string(options_.index) +
                    "'s libpython " + image->libpython + ": " + dlerror());
  }
#if MANYPY_TORCH_GLOBAL_INTERPRETER
  // What the host's PyInterpreter needs of this runtime (global_py_interpreter.h),
  // joined with its copy's PyInterpreter in AddTorchInterpreter, on this thread.
  t_booting = BootingRuntime{dlsym(libpython, "PyType_Type"),
                             reinterpret_cast<void* (*)()>(dlsym(libpython, "PyEval_SaveThread")),
                             reinterpret_cast<void (*)(void*)>(dlsym(libpython, "PyEval_RestoreThread"))};
  if (t_booting.type_type == nullptr || t_booting.save_thread == nullptr ||
      t_booting.restore_thread == nullptr) {
    return Internal(image->libpython + " does not export PyType_Type, PyEval_SaveThread and "
                    "PyEval_RestoreThread");
  }
#endif
  void* shim_handle = dlopen(image->shim.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (shim_handle == nullptr) {
    return Internal("cannot load interpreter shim " + image->shim + ": " + dlerror());
  }
  auto create = reinterpret_cast<shim::CreateFn>(dlsym(shim_handle, shim::kCreateSymbol));
  if (create == nullptr) return Internal(image->shim + " does not export " + shim::kCreateSymbol);

  shim::ShimConfig config;
  config.index = options_.index;
  config.owns_registrations = options_.owns_registrations;
  config.python_executable = options_.python_executable;
  config.extra_sys_path = options_.extra_sys_path;
  config.preload_modules = options_.preload_modules;
  config.lazy_modules = options_.lazy_modules;
  config.lazy_functions = options_.lazy_functions;
  config.lazy_values = options_.lazy_values;
  config.callbacks.context = this;
  config.callbacks.prepare_extension = &Interpreter::PrepareExtension;
  config.callbacks.call_host = &Interpreter::CallHost;
  config.callbacks.torch_interpreter = &Interpreter::AddTorchInterpreter;
  config.callbacks.next_python_kernel_with_keyset = &SetNextPythonKernelWithKeyset;
  config.callbacks.python_kernel_registered_by = [](const char* op, const char* key,
                                                    const void* py_interpreter) {
    return PythonKernelRegisteredBy(op, key, py_interpreter);
  };
  if (options_.arena_cache) {
    arenas_ = new ArenaCache();
    config.callbacks.arena_context = arenas_;
    config.callbacks.arena_alloc = &ArenaCache::Alloc;
    config.callbacks.arena_free = &ArenaCache::Free;
  }
  std::string error;
  on_torch_version_ = options_.on_torch_version;
  shim_ = create(&config, &error);
  on_torch_version_ = nullptr;  // what it refers to may not outlive Start
  if (shim_ == nullptr) {
#if MANYPY_TORCH_GLOBAL_INTERPRETER
    if (torch_interpreter_ != nullptr) LeaveGlobalPyInterpreter(torch_interpreter_);  // gone
#endif
    if (torch_interpreter_ != nullptr) RemoveTorchInterpreter(torch_interpreter_);
    return Internal("interpreter " + std::to_string(options_.index) + " failed to start: " + error);
  }
  return Status::Ok();
}

Interpreter::~Interpreter() {
  if (!owner_.joinable()) return;
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  owner_.join();
}

void Interpreter::FlushOutput() {
  int token = shim_->AcquireGil();
  try {
    shim_->Exec("import sys\nfor _stream in (sys.stdout, sys.stderr):\n    _stream.flush()\n");
  } catch (const std::exception&) {
    // A model replaced sys.stdout with something unflushable: nothing to save.
  }
  shim_->ReleaseGil(token);
}

bool Interpreter::CallHost(void* self, const char* service, const Value* request, Value* response,
                           std::string* error) {
  auto* interp = static_cast<Interpreter*>(self);
  try {
    if (strcmp(service, kTorchVersionService) == 0) {  // only while booting: see Options
      if (interp->on_torch_version_) interp->on_torch_version_(request->to_str());
      *response = Value();
      return true;
    }
    StatusOr<Value> answer = CallHostService(service, interp->options_.index, *request);
    if (!answer.ok()) {
      *error = answer.status().ToString();
      return false;
    }
    *response = std::move(*answer);
    return true;
  } catch (const std::exception& e) {  // never across the shim boundary
    *error = std::string("INTERNAL: ") + e.what();
    return false;
  }
}

void Interpreter::AddTorchInterpreter(void* self, const void* py_interpreter,
                                      int (*thread_state)()) {
  static_cast<Interpreter*>(self)->torch_interpreter_ = py_interpreter;
  manypy::AddTorchInterpreter(py_interpreter, thread_state);
#if MANYPY_TORCH_GLOBAL_INTERPRETER
  GlobalInterpreterMember member;
  member.type_type = t_booting.type_type;
  member.py_interpreter = py_interpreter;
  member.thread_state = thread_state;
  member.save_thread = t_booting.save_thread;
  member.restore_thread = t_booting.restore_thread;
  if (!JoinGlobalPyInterpreter(member)) {
    // Thousands of interpreters in one process: stop rather than misroute.
    fprintf(stderr, "manypy: too many interpreters for libtorch's routing table\n");
    abort();
  }
#endif
}

bool Interpreter::PrepareExtension(void* self, const char* module, const char* origin, char* out,
                                   size_t out_len) {
  auto* interp = static_cast<Interpreter*>(self);
  auto path = interp->preparer_->PrepareObject(interp->slot_, origin);
  std::string text = path.ok() ? *path : path.status().ToString();
  (void)module;
  snprintf(out, out_len, "%s", text.c_str());
  return path.ok() && text.size() < out_len;
}

}  // namespace manypy
