// The per-interpreter side of manypy: one private copy of this library is
// loaded next to each private copy of libpython, so every symbol here binds to
// that interpreter's CPython runtime and libtorch_python copy.
#include <Python.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#if MANYPY_TORCH_HOOKS
#include <c10/core/impl/PyInterpreter.h>
// libtorch_python's (torch/csrc/PyInterpreter.h, which needs pybind11): this
// library copy is linked to its interpreter's copy of libtorch_python.
c10::impl::PyInterpreter* getPyInterpreter();
#endif

#include "interpreters/python_error.h"
#include "interpreters/shim/boot_source.h"
#include "interpreters/shim/python_convert.h"
#include "interpreters/shim/shim_api.h"
#if MANYPY_TORCH_GLOBAL_INTERPRETER
#include "interpreters/shim/torch_api_function.h"
#endif

namespace manypy::shim {
namespace {

// Constant after manypy_shim_create; this copy of the library serves exactly one interpreter.
ShimConfig g_config;

// Set once a thread has entered this interpreter: its PyThreadState is then
// kept (by one extra, never-released PyGILState_Ensure) instead of being
// created and destroyed on every session.
thread_local bool t_thread_state_kept = false;

// Open interruptible scopes: token -> the Python thread id running it.
// Guarded by this interpreter's GIL.
std::map<uint64_t, unsigned long> g_interruptible;
uint64_t g_last_token = 0;
// _manypy.ExecutionInterrupted; a BaseException so that a model's
// `except Exception:` cannot swallow it.
PyObject* g_interrupted_type = nullptr;

PyObject* PrepareExtension(PyObject*, PyObject* args) {
  const char* name;
  const char* origin;
  if (!PyArg_ParseTuple(args, "ss", &name, &origin)) return nullptr;
  const HostCallbacks& cb = g_config.callbacks;
  if (cb.prepare_extension == nullptr) return PyUnicode_FromString(origin);
  char out[4096];
  bool ok;
  Py_BEGIN_ALLOW_THREADS  // preparing may run patchelf; let other threads of this interpreter run
  ok = cb.prepare_extension(cb.context, name, origin, out, sizeof(out));
  Py_END_ALLOW_THREADS
  if (!ok) {
    PyErr_Format(PyExc_ImportError, "manypy could not prepare extension module %s (%s): %s", name,
                 origin, out);
    return nullptr;
  }
  return PyUnicode_FromString(out);
}

// _manypy.HostError: the host refused a call_host request; args are (code, message).
PyObject* g_host_error_type = nullptr;

// _manypy.call_host(service, request) -> the host's answer (host_services.h).
PyObject* CallHost(PyObject*, PyObject* args) {
  const char* service;
  PyObject* request;
  if (!PyArg_ParseTuple(args, "sO", &service, &request)) return nullptr;
  const HostCallbacks& cb = g_config.callbacks;
  if (cb.call_host == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "this interpreter's host answers no calls");
    return nullptr;
  }
  Value in;
  try {
    in = FromPython(request);
  } catch (const PythonError& e) {  // converted and cleared: raise it again for the caller
    PyErr_SetString(PyExc_TypeError, e.message().c_str());
    return nullptr;
  }
  Value out;
  std::string error;
  bool ok;
  Py_BEGIN_ALLOW_THREADS  // the host may wait (a nested inference): let this interpreter run on
  ok = cb.call_host(cb.context, service, &in, &out, &error);
  Py_END_ALLOW_THREADS
  in = Value();  // drop the request's tensors with the GIL held, as they were made
  if (!ok) {
    size_t colon = error.find(": ");
    std::string code = colon == std::string::npos ? "INTERNAL" : error.substr(0, colon);
    std::string message = colon == std::string::npos ? error : error.substr(colon + 2);
    PyObject* e = Py_BuildValue("(ss)", code.c_str(), message.c_str());
    if (e != nullptr) {
      PyErr_SetObject(g_host_error_type, e);
      Py_DECREF(e);
    }
    return nullptr;
  }
  return ToPython(out);  // nullptr with the exception set when it cannot
}

#if MANYPY_TORCH_HOOKS
// The interpreter this library copy serves, as libtorch_python's copy knows it.
const void* TorchInterpreter() { return getPyInterpreter(); }

// HostCallbacks::torch_interpreter's thread_state: this runtime's answer.
int ThreadState() {
  if (PyGILState_GetThisThreadState() == nullptr) return 0;
  return PyGILState_Check() ? 2 : 1;
}

// _manypy.next_kernel_with_keyset(flag): torch.library.Library.impl's
// with_keyset for the registration this thread makes next (python_kernels.h).
PyObject* NextKernelWithKeyset(PyObject*, PyObject* args) {
  int with_keyset;
  if (!PyArg_ParseTuple(args, "p", &with_keyset)) return nullptr;
  const HostCallbacks& cb = g_config.callbacks;
  if (cb.next_python_kernel_with_keyset != nullptr) cb.next_python_kernel_with_keyset(with_keyset);
  Py_RETURN_NONE;
}

// _manypy.python_kernel_registered_here(op, key) -> 1, 0 or -1 (python_kernels.h).
PyObject* PythonKernelRegisteredHere(PyObject*, PyObject* args) {
  const char* op;
  const char* key;
  if (!PyArg_ParseTuple(args, "ss", &op, &key)) return nullptr;
  const HostCallbacks& cb = g_config.callbacks;
  if (cb.python_kernel_registered_by == nullptr) return PyLong_FromLong(-1);
  return PyLong_FromLong(cb.python_kernel_registered_by(op, key, TorchInterpreter()));
}
#endif

PyMethodDef kManypyMethods[] = {
    {"prepare_extension", PrepareExtension, METH_VARARGS,
     "prepare_extension(name, origin) -> path of this interpreter's copy"},
    {"call_host", CallHost, METH_VARARGS,
     "call_host(service, request) -> the host's answer; raises HostError(code, message)"},
#if MANYPY_TORCH_HOOKS
    {"next_kernel_with_keyset", NextKernelWithKeyset, METH_VARARGS,
     "next_kernel_with_keyset(flag): with_keyset of the next Python kernel this thread registers"},
    {"python_kernel_registered_here", PythonKernelRegisteredHere, METH_VARARGS,
     "python_kernel_registered_here(op, key) -> 1 here, 0 only elsewhere, -1 not from Python"},
#endif
    {nullptr, nullptr, 0, nullptr},
};

PyObject* AsObject(Handle h) { return static_cast<PyObject*>(h); }

PyObject* MainDict() {
  PyObject* main = PyImport_AddModule("__main__");  // borrowed
  return PyModule_GetDict(main);                     // borrowed
}

class Shim final : public InterpreterShim {
 public:
  int AcquireGil() override {
    PyGILState_STATE state = PyGILState_Ensure();
    if (!t_thread_state_kept) {
      PyGILState_Ensure();
      t_thread_state_kept = true;
    }
    return static_cast<int>(state);
  }
  void ReleaseGil(int token) override { PyGILState_Release(static_cast<PyGILState_STATE>(token)); }

  Handle Import(const std::string& module) override {
    return Check(PyImport_ImportModule(module.c_str()));
  }
  Handle GetAttr(Handle object, const std::string& name) override {
    return Check(PyObject_GetAttrString(AsObject(object), name.c_str()));
  }
  bool HasAttr(Handle object, const std::string& name) override {
    return PyObject_HasAttrString(AsObject(object), name.c_str()) == 1;
  }
  Handle Call(Handle callable, const std::vector<Handle>& args, const Kwargs& kwargs) override {
    PyObject* tuple = Check(PyTuple_New(args.size()));
    for (size_t i = 0; i < args.size(); ++i) {
      Py_INCREF(AsObject(args[i]));
      PyTuple_SET_ITEM(tuple, i, AsObject(args[i]));
    }
    PyObject* dict = nullptr;
    if (!kwargs.empty()) {
      dict = PyDict_New();
      for (const auto& [key, value] : kwargs) {
        PyObject* v = dict ? ToPython(value) : nullptr;
        if (v == nullptr || PyDict_SetItemString(dict, key.c_str(), v) != 0) {
          Py_XDECREF(v);
          Py_XDECREF(dict);
          Py_DECREF(tuple);
          ThrowPythonError();
        }
        Py_DECREF(v);
      }
    }
    PyObject* result = PyObject_Call(AsObject(callable), tuple, dict);
    Py_DECREF(tuple);
    Py_XDECREF(dict);
    return Check(result);
  }
  Handle FromValue(const Value& value) override { return Check(ToPython(value)); }
  Value ToValue(Handle object) override { return FromPython(AsObject(object)); }
  void Exec(const std::string& source) override {
    PyObject* result = PyRun_String(source.c_str(), Py_file_input, MainDict(), MainDict());
    Py_DECREF(Check(result));
  }
  Handle Eval(const std::string& expression) override {
    return Check(PyRun_String(expression.c_str(), Py_eval_input, MainDict(), MainDict()));
  }
  std::string Repr(Handle object) override {
    PyObject* r = Check(PyObject_Repr(AsObject(object)));
    const char* s = PyUnicode_AsUTF8(r);
    std::string out = s ? s : "";
    Py_DECREF(r);
    if (s == nullptr) ThrowPythonError();
    return out;
  }
  void IncRef(Handle object) override { Py_INCREF(AsObject(object)); }

  uint64_t BeginInterruptible() override {
    uint64_t token = ++g_last_token;
    g_interruptible[token] = PyThread_get_thread_ident();
    return token;
  }
  void EndInterruptible(uint64_t token) override {
    auto it = g_interruptible.find(token);
    if (it == g_interruptible.end()) return;
    PyThreadState_SetAsyncExc(it->second, nullptr);  // an interrupt that came too late
    g_interruptible.erase(it);
  }
  bool Interrupt(uint64_t token) override {
    auto it = g_interruptible.find(token);
    if (it == g_interruptible.end()) return false;
    return PyThreadState_SetAsyncExc(it->second, g_interrupted_type) == 1;
  }
  void DecRef(Handle object) override { Py_DECREF(AsObject(object)); }

  void Finalize() override {
    PyGILState_Ensure();
    // Py_FinalizeEx runs atexit hooks and frees every module of this runtime;
    // the library copies stay mapped (libtorch may still point into them).
    Py_FinalizeEx();
  }
};

// A new frozenset of `names`.
PyObject* FrozenSetOf(const std::vector<std::string>& names) {
  PyObject* set = Check(PyFrozenSet_New(nullptr));
  for (const auto& n : names) {
    PyObject* name = Check(PyUnicode_FromString(n.c_str()));
    int added = PySet_Add(set, name);
    Py_DECREF(name);
    if (added != 0) ThrowPythonError();
  }
  return set;
}

// Runs in a fresh runtime with the GIL held.
void Boot(const ShimConfig& config) {
  PyObject* module = Check(PyModule_New("_manypy"));
  PyModule_AddFunctions(module, kManypyMethods);
  PyModule_AddIntConstant(module, "index", config.index);
  PyModule_AddObjectRef(module, "owns_registrations", config.owns_registrations ? Py_True : Py_False);
  // PyTorch 2.x: each interpreter registers its own torch.library kernels.
  PyModule_AddObjectRef(module, "routes_python_kernels", MANYPY_TORCH_HOOKS ? Py_True : Py_False);
  PyModule_AddObject(module, "lazy_modules", FrozenSetOf(config.lazy_modules));  // steals it
  PyModule_AddObject(module, "lazy_functions", FrozenSetOf(config.lazy_functions));
  PyModule_AddObject(module, "lazy_values", FrozenSetOf(config.lazy_values));
  g_interrupted_type = Check(PyErr_NewExceptionWithDoc(
      "_manypy.ExecutionInterrupted",
      "Raised inside a call that ran past its execution limit (the host interrupted it).",
      PyExc_BaseException, nullptr));
  PyModule_AddObjectRef(module, "ExecutionInterrupted", g_interrupted_type);
  g_host_error_type = Check(PyErr_NewExceptionWithDoc(
      "_manypy.HostError", "The host refused a call_host request: args are (code, message).",
      PyExc_Exception, nullptr));
  PyModule_AddObjectRef(module, "HostError", g_host_error_type);
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  PyDict_SetItemString(modules, "_manypy", module);
  Py_DECREF(module);

  PyObject* globals = Check(PyDict_New());
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyDict_SetItemString(globals, "__name__", PyUnicode_FromString("manypy_boot"));
  PyObject* result = PyRun_String(kBootSource, Py_file_input, globals, globals);
  Py_DECREF(globals);
  Py_DECREF(Check(result));

  // `site` is imported only now, so even its imports go through the finder.
  std::string site = "import site\nsite.main()\n";
  for (const auto& p : config.extra_sys_path) {
    PyObject* path = PySys_GetObject("path");  // borrowed
    PyObject* s = Check(PyUnicode_FromString(p.c_str()));
    PyList_Append(path, s);
    Py_DECREF(s);
  }
  Py_DECREF(Check(PyRun_String(site.c_str(), Py_file_input, MainDict(), MainDict())));
  for (const auto& m : config.preload_modules) Py_DECREF(Check(PyImport_ImportModule(m.c_str())));
  // What importing torch leaves behind, given back before the model loads:
  // the source files linecache read for inspect (about 1.2 MiB; read again
  // if a traceback needs them) and reference cycles (module-level helpers,
  // failed optional imports) the collector's thresholds would keep a while.
  Py_DECREF(Check(PyRun_String("import linecache\nlinecache.clearcache()\n", Py_file_input,
                               MainDict(), MainDict())));
  PyGC_Collect();
  // What start-up built (torch's modules, classes and functions: most of the
  // interpreter's objects) lives as long as the interpreter. gc.freeze moves
  // it out of the collector's generations, so a full collection (each model
  // unload runs one, and Python runs them as objects accumulate) traverses
  // only what came later instead of every object of torch.
  Py_DECREF(Check(PyRun_String("import gc\ngc.freeze()\n", Py_file_input, MainDict(), MainDict())));
}

}  // namespace

}  // namespace manypy::shim

extern "C" __attribute__((visibility("default"))) manypy::shim::InterpreterShim*
manypy_shim_create(const manypy::shim::ShimConfig* config, std::string* error) {
  using namespace manypy::shim;
  g_config = *config;
  const HostCallbacks& cb = g_config.callbacks;
#if MANYPY_TORCH_HOOKS
  if (cb.torch_interpreter != nullptr) cb.torch_interpreter(cb.context, TorchInterpreter(), ThreadState);
#if MANYPY_TORCH_GLOBAL_INTERPRETER
  if (!RouteTorchApiFunction(error)) {
    *error = "cannot give this interpreter its own operator objects: " + *error;
    return nullptr;
  }
#endif
#endif
  if (cb.arena_alloc != nullptr) {
    PyObjectArenaAllocator arenas{cb.arena_context, cb.arena_alloc, cb.arena_free};
    PyObject_SetArenaAllocator(&arenas);  // copied by CPython; must precede initialisation
  }
  PyConfig pc;
  PyConfig_InitIsolatedConfig(&pc);  // ignore PYTHON* variables and the user's site directory
  pc.install_signal_handlers = 0;    // signals belong to the host process
  pc.site_import = 0;                // imported by Boot, after the extension finder is installed
  // No column ranges in code objects (-X no_debug_ranges): tracebacks lose
  // their ^^^ markers, every interpreter saves about 0.4 MiB of torch's code.
  pc.code_debug_ranges = 0;
  pc.parse_argv = 0;
  PyStatus st = PyConfig_SetBytesString(&pc, &pc.program_name, g_config.python_executable.c_str());
  if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&pc);
  PyConfig_Clear(&pc);
  if (PyStatus_Exception(st)) {
    *error = std::string("Python initialisation failed: ") + (st.err_msg ? st.err_msg : "?");
    return nullptr;
  }
  try {
    Boot(g_config);
  } catch (const manypy::PythonError& e) {
    *error = "interpreter boot failed: " + std::string(e.what()) + "\n" + e.traceback();
    // Finalized here, on the thread that initialised it, rather than left
    // with its GIL held by a thread that is about to end: torch 2.6's
    // libtorch_python takes the GIL in a static destructor at process exit,
    // which then waited forever (PoolErrorsTest.FailingPreload...).
    Py_FinalizeEx();
    return nullptr;
  }
  PyEval_SaveThread();  // the creating thread releases the GIL; sessions take it
  return new Shim();
}
