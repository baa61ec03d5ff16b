#include "interpreters/python_kernels.h"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string_view>
#include <utility>
#include <vector>

#include "common/mutex.h"

#if MANYPY_TORCH_HOOKS
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/PyInterpreter.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include "interpreters/python_kernel_hooks.h"
#if MANYPY_TORCH_GLOBAL_INTERPRETER
#include "interpreters/global_py_interpreter.h"
#endif
#endif

// Why (PyTorch 2.x, docs/debian13.md trap 5): a kernel registered from Python
// (torch.library) is a PythonKernelHolder that calls its function in the
// libtorch_python copy that registered it, under that copy's GIL. Called from
// another interpreter it met tensors that interpreter had wrapped and failed
// ("cannot access PyObject for Tensor on interpreter ..."). Every
// libtorch_python copy keeps its own table of the Python kernels registered
// through it, and its PyInterpreter's python_op_registration_trampoline calls
// the one from that table (the path torch::deploy left for this). So each
// (operator, dispatch key) gets one router in the dispatcher, which hands the
// call to the calling interpreter's trampoline: every interpreter that runs
// the model's registering code runs its own kernel, with its own tensors.
// Registrations from Python are kept for the life of the process: the
// dispatcher is process-wide, and one interpreter's unload (a model's
// torch.library.Library collected) must not take an operator from the others.

namespace manypy {
namespace {

std::atomic<int> g_definitions{0};
std::atomic<int> g_same_definitions{0};
std::atomic<int> g_registrations{0};

thread_local bool t_next_with_keyset = false;
thread_local std::string t_definer;
thread_local const void* t_session_interpreter = nullptr;

struct TorchInterpreter {
  const void* py_interpreter;
  int (*thread_state)();
};
SharedMutex g_interpreters_mu;
std::vector<TorchInterpreter>& Interpreters() REQUIRES_SHARED(g_interpreters_mu) {
  static auto* interpreters = new std::vector<TorchInterpreter>();
  return *interpreters;
}

}  // namespace

void AddTorchInterpreter(const void* py_interpreter, int (*thread_state)()) {
  WriterLock lock(g_interpreters_mu);
  Interpreters().push_back({py_interpreter, thread_state});
}

const void* SetCallingInterpreter(const void* py_interpreter) {
  return std::exchange(t_session_interpreter, py_interpreter);
}

void RemoveTorchInterpreter(const void* py_interpreter) {
  WriterLock lock(g_interpreters_mu);
  auto& all = Interpreters();
  for (auto it = all.begin(); it != all.end(); ++it) {
    if (it->py_interpreter == py_interpreter) {
      all.erase(it);
      return;
    }
  }
}

void SetNextPythonKernelWithKeyset(bool with_keyset) { t_next_with_keyset = with_keyset; }

ScopedOperatorDefiner::ScopedOperatorDefiner(std::string name) : previous_(std::move(t_definer)) {
  t_definer = std::move(name);
}

ScopedOperatorDefiner::~ScopedOperatorDefiner() { t_definer = std::move(previous_); }

#if !MANYPY_TORCH_HOOKS
PythonKernelCounts PythonKernels() { return {}; }
int PythonKernelRegisteredBy(const std::string&, const std::string&, const void*) { return -1; }
#else
namespace {

// The interpreter the calling thread runs Python in, or null: the one whose
// GIL it holds (a thread holds at most one: a nested call into another model
// lets its caller's go), else its session's (torch lets the GIL go while it
// runs an operator), else the only one it has a thread state in (a thread
// that Python code started).
const c10::impl::PyInterpreter* CallingInterpreter() {
  ReaderLock lock(g_interpreters_mu);
  const void* only = nullptr;
  int with_state = 0;
  for (const auto& i : Interpreters()) {
    int state = i.thread_state();
    if (state == 2) return static_cast<const c10::impl::PyInterpreter*>(i.py_interpreter);
    if (state == 1) {
      only = i.py_interpreter;
      with_state++;
    }
  }
  if (t_session_interpreter != nullptr) {
    return static_cast<const c10::impl::PyInterpreter*>(t_session_interpreter);
  }
  return with_state == 1 ? static_cast<const c10::impl::PyInterpreter*>(only) : nullptr;
}

struct Route {
  bool with_keyset = false;
  std::set<const void*> registered_by;  // PyInterpreters whose table has the kernel
  std::optional<c10::RegistrationHandleRAII> handle;
};
struct Definition {
  std::string definer;
  c10::RegistrationHandleRAII handle;
};
Mutex g_routes_mu;
// Keyed by "ns::name.overload|DispatchKey".
std::map<std::string, Route>& Routes() REQUIRES(g_routes_mu) {
  static auto* routes = new std::map<std::string, Route>();
  return *routes;
}
std::string RouteKey(const c10::OperatorName& op, c10::DispatchKey key) {
  return c10::toString(op) + "|" + c10::toString(key);
}
// Keyed by "ns::name.overload".
std::map<std::string, Definition>& Definitions() REQUIRES(g_routes_mu) {
  static auto* definitions = new std::map<std::string, Definition>();
  return *definitions;
}

c10::RegistrationHandleRAII Kept() {
  return c10::RegistrationHandleRAII([] {});  // the registration itself lives in our tables
}

// The interpreter a call belongs to when its arguments say so, as
// PythonKernelHolder decides: an active TorchDispatchMode (FakeTensorMode, ...)
// is the interpreter that entered it; a tensor subclass with the Python key
// is the interpreter that made it.
const c10::impl::PyInterpreter* HomeOf(const c10::OperatorHandle& op,
                                       const torch::jit::Stack& stack) {
  if (int64_t modes = c10::impl::TorchDispatchModeTLS::stack_len(); modes > 0) {
    return &c10::impl::TorchDispatchModeTLS::get_stack_at(modes - 1)->pyinterpreter();
  }
  auto python_keyed = [](const c10::IValue& v) -> const c10::impl::PyInterpreter* {
    c10::TensorImpl* impl = v.unsafeToTensorImpl();
    if (!impl->key_set().has(c10::DispatchKey::Python)) return nullptr;
#if MANYPY_TORCH_GLOBAL_INTERPRETER
    // PyTorch >= 2.9: no tag; the wrapper's type says which interpreter made
    // it (global_py_interpreter.h).
    return static_cast<const c10::impl::PyInterpreter*>(
        OwnerPyInterpreter(impl->pyobj_slot()->load_pyobj()));
#else
    return impl->pyobj_slot()->pyobj_interpreter();
#endif
  };
  for (const auto& v : torch::jit::last(stack, op.schema().arguments().size())) {
    if (v.isTensor()) {
      if (auto* home = python_keyed(v)) return home;
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      for (const auto& element : v.toListRef()) {
        if (element.isNone()) continue;
        if (auto* home = python_keyed(element)) return home;
      }
    }
  }
  return nullptr;
}

class Router final : public c10::OperatorKernel {
 public:
  Router(c10::DispatchKey key, bool with_keyset) : key_(key), with_keyset_(with_keyset) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
    const c10::impl::PyInterpreter* target = HomeOf(op, *stack);
    if (target == nullptr) target = CallingInterpreter();
    TORCH_CHECK(target != nullptr, "operator ", op.operator_name(), " (", key_,
                ") has a kernel registered from Python, and this thread is in no interpreter of "
                "manypy to run it in");
    {
      MutexLock lock(g_routes_mu);
      auto it = Routes().find(RouteKey(op.operator_name(), key_));
      TORCH_CHECK(it != Routes().end() && it->second.registered_by.count(target) > 0,
                  "operator ", op.operator_name(), " has a kernel for ", key_,
                  " registered from Python by another interpreter of this process, not by this "
                  "one: the module that registers it must be imported here too");
    }
    (*target)->python_op_registration_trampoline(op, key_, keys, stack, with_keyset_,
                                                 /*with_op=*/false);
  }

 private:
  const c10::DispatchKey key_;
  const bool with_keyset_;
};

}  // namespace

namespace detail {

const c10::impl::PyInterpreter* CallingPyInterpreter() { return CallingInterpreter(); }

bool IsPythonRegistration(const std::string& debug) {
  // Up to 2.8 torch._C._dispatch_library makes every Library from Python with
  // file "/dev/null". Later releases pass the Python caller's file
  // (torch/library.py: `f.f_code.co_filename`), which ends in ".py" or is a
  // pseudo-file ("<string>", "<torch_package_0>..."); a C++ registration's
  // is its __FILE__ (.cpp, .cc, .h, ...).
  constexpr std::string_view kAt = "registered at ";
  if (debug.rfind(kAt, 0) != 0) return false;
  std::string_view where(debug);
  where.remove_prefix(kAt.size());
  if (where.rfind("/dev/null:", 0) == 0) return true;
#if MANYPY_TORCH_GLOBAL_INTERPRETER
  size_t colon = where.rfind(':');
  std::string_view file = colon == std::string_view::npos ? where : where.substr(0, colon);
  if (!file.empty() && file.front() == '<') return true;
  if (file.size() > 3 && file.substr(file.size() - 3) == ".py") return true;
#endif
  return false;
}

c10::RegistrationHandleRAII DefineFromPython(RegisterDefFn real, c10::Dispatcher* dispatcher,
                                             c10::FunctionSchema schema, std::string debug,
                                             std::vector<at::Tag> tags) {
  MutexLock lock(g_routes_mu);
  const c10::OperatorName name = schema.operator_name();
  std::string definer = t_definer.empty() ? "code outside any model" : t_definer;
  auto& definitions = Definitions();
  if (auto it = definitions.find(c10::toString(name)); it != definitions.end()) {
    auto op = dispatcher->findSchema(name);
    if (op && op->schema() == schema) {
      g_same_definitions++;
      return Kept();
    }
    TORCH_CHECK(false, "operator ", name, " is already defined in this server as ",
                op ? c10::toString(op->schema()) : std::string("?"), " by ", it->second.definer,
                "; ", definer, " defines it as ", schema, ". One process has one dispatcher: ",
                "operators of different models need different names (or namespaces)");
  }
  c10::RegistrationHandleRAII handle =
      real(dispatcher, std::move(schema), std::move(debug), std::move(tags));
  definitions.emplace(c10::toString(name), Definition{std::move(definer), std::move(handle)});
  g_definitions++;
  return Kept();
}

c10::RegistrationHandleRAII RouteFromPython(RegisterImplFn real, c10::Dispatcher* dispatcher,
                                            c10::OperatorName name, c10::DispatchKey key,
                                            c10::KernelFunction kernel, std::string debug) {
  bool with_keyset = std::exchange(t_next_with_keyset, false);
  const c10::impl::PyInterpreter* by = CallingInterpreter();
  TORCH_CHECK(by != nullptr, "a kernel for ", name, " (", key,
              ") is registered from Python on a thread that is in no interpreter of manypy");
  {
    MutexLock lock(g_routes_mu);
    Route& route = Routes()[RouteKey(name, key)];
    route.registered_by.insert(by);
    g_registrations++;
    if (!route.handle) {
      route.with_keyset = with_keyset;
      route.handle.emplace(real(dispatcher, name, key,
                                c10::KernelFunction::makeFromBoxedFunctor(
                                    std::make_unique<Router>(key, with_keyset)),
                                std::nullopt, nullptr, std::move(debug)));
    }
  }
  // `kernel` (this copy's PythonKernelHolder) goes here, outside the lock: its
  // function's reference is dropped in this interpreter, which may run Python.
  return Kept();
}

}  // namespace detail

PythonKernelCounts PythonKernels() {
  MutexLock lock(g_routes_mu);
  return {static_cast<int>(Routes().size()), g_registrations.load(), g_definitions.load(),
          g_same_definitions.load()};
}

int PythonKernelRegisteredBy(const std::string& op, const std::string& dispatch_key,
                             const void* py_interpreter) {
  c10::OperatorName name{op, ""};
  if (size_t sep = op.find("::"); sep != std::string::npos) {
    if (size_t dot = op.find('.', sep + 2); dot != std::string::npos) {
      name = c10::OperatorName{op.substr(0, dot), op.substr(dot + 1)};
    }
  }
  c10::DispatchKey key;
  try {
    key = c10::parseDispatchKey(dispatch_key);
  } catch (const c10::Error&) {
    return -1;
  }
  MutexLock lock(g_routes_mu);
  auto it = Routes().find(RouteKey(name, key));
  if (it == Routes().end()) return -1;
  return it->second.registered_by.count(py_interpreter) > 0 ? 1 : 0;
}
#endif  // MANYPY_TORCH_HOOKS

}  // namespace manypy
