// PyTorch >= 2.9: this interpreter's torch.ops.<ns>.<op>.<overload> object
// for an operator, cached per interpreter (the shim is one copy per
// interpreter). Called with or without this interpreter's GIL.
#include "interpreters/shim/torch_api_function.h"

#include <Python.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/PyInterpreter.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

// libtorch_python's (torch/csrc/PyInterpreter.h); this copy's.
c10::impl::PyInterpreter* getPyInterpreter();

// Why: libtorch_python's torch::detail::getTorchApiFunction(op), which its
// Python-dispatch paths (__torch_dispatch__, the Python dispatcher used by
// FakeTensorMode, custom_op and torch.compile) call for an operator's Python
// object, caches that object in the operator's entry, process-wide: 2.14's
// c10::PyHandleCache keeps one PyObject* and no interpreter
// (c10/core/PyHandleCache.h:40-59, ATen/core/dispatch/OperatorEntry.h:227-229,
// :241), where 2.8 and earlier kept the interpreter that filled it and let the
// others take the slow path. The first interpreter to reach an operator
// fills it, and every other interpreter then gets that interpreter's object
// (seen: interpreter 0 reading an attribute of interpreter 1's OpOverload in
// python_kernels_test, a segmentation fault). Every copy calls the exported
// function directly (134 call sites in libtorch_python 2.14.1, none through
// the PLT), so the shim rewrites its entry in this copy to jump here.

namespace manypy::shim {
namespace {

constexpr const char* kGetTorchApiFunction =
    "_ZN5torch6detail19getTorchApiFunctionERKN3c1014OperatorHandleE";

// Keyed by the operator's schema (one per operator entry, lives for the
// process); values are new references, kept for the life of the interpreter
// (torch.ops objects are cached by torch.ops itself).
std::unordered_map<const void*, PyObject*>& Cache() {
  static auto* cache = new std::unordered_map<const void*, PyObject*>();
  return *cache;
}

// Returns a borrowed reference (py::handle's layout: one PyObject*, returned
// in a register), as getTorchApiFunction does; raises nothing: on a Python
// error the error stays set and null is returned, which the callers check.
PyObject* TorchApiFunction(const c10::OperatorHandle& op) {
  PyGILState_STATE gil = PyGILState_Ensure();
  const void* key = &op.schema();
  auto& cache = Cache();
  PyObject* found = nullptr;
  if (auto it = cache.find(key); it != cache.end()) {
    found = it->second;
  } else {
    const std::string& qualified = op.operator_name().name;
    size_t sep = qualified.find("::");
    std::string ns = qualified.substr(0, sep);
    std::string name = sep == std::string::npos ? qualified : qualified.substr(sep + 2);
    const std::string& overload = op.schema().overload_name();
    PyObject* torch = PyImport_ImportModule("torch");
    PyObject* ops = torch ? PyObject_GetAttrString(torch, "ops") : nullptr;
    PyObject* space = ops ? PyObject_GetAttrString(ops, ns.c_str()) : nullptr;
    PyObject* packet = space ? PyObject_GetAttrString(space, name.c_str()) : nullptr;
    found = packet ? PyObject_GetAttrString(packet, overload.empty() ? "default" : overload.c_str())
                   : nullptr;
    Py_XDECREF(packet);
    Py_XDECREF(space);
    Py_XDECREF(ops);
    Py_XDECREF(torch);
    if (found != nullptr) cache.emplace(key, found);
  }
  PyGILState_Release(gil);
  return found;
}

}  // namespace

bool RouteTorchApiFunction(std::string* error) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&getPyInterpreter), &info) == 0 || info.dli_fname == nullptr) {
    *error = "cannot find this interpreter's libtorch_python";
    return false;
  }
  void* library = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  void* target = library ? dlsym(library, kGetTorchApiFunction) : nullptr;
  if (target == nullptr) {
    *error = std::string(info.dli_fname) + " does not export " + kGetTorchApiFunction;
    return false;
  }
  // jmp *0(%rip); .quad TorchApiFunction (x86-64), over the function's first
  // 14 bytes, none of which is a branch target in 2.14.1's code.
  unsigned char jump[14] = {0xff, 0x25, 0, 0, 0, 0};
  uint64_t to = reinterpret_cast<uint64_t>(&TorchApiFunction);
  memcpy(jump + 6, &to, sizeof(to));
  long page = sysconf(_SC_PAGESIZE);
  uintptr_t start = reinterpret_cast<uintptr_t>(target) & ~static_cast<uintptr_t>(page - 1);
  size_t length = reinterpret_cast<uintptr_t>(target) + sizeof(jump) - start;
  if (mprotect(reinterpret_cast<void*>(start), length, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
    *error = std::string("mprotect: ") + strerror(errno);
    return false;
  }
  memcpy(target, jump, sizeof(jump));
  mprotect(reinterpret_cast<void*>(start), length, PROT_READ | PROT_EXEC);
  __builtin___clear_cache(static_cast<char*>(target), static_cast<char*>(target) + sizeof(jump));
  return true;
}

}  // namespace manypy::shim
