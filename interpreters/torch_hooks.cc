#include "interpreters/torch_hooks.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>

#if MANYPY_TORCH_HOOKS
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>
#if MANYPY_TORCH_GLOBAL_INTERPRETER
#include <torch/custom_class_detail.h>
#endif

#include "common/mutex.h"
#include "interpreters/python_kernel_hooks.h"
#endif

// Why (PyTorch 2.6, found by running it; docs/debian13.md): libtorch_python
// has static initializers that register process-wide things in libtorch_cpu
// when it is loaded. Every interpreter loads its own copy, so from the second
// copy on they register a second time and throw from inside dlopen, which
// ends the process (std::terminate):
//  - TORCH_LIBRARY_FRAGMENT(inductor, ...) defines
//    inductor::resize_storage_bytes_ (torch/csrc/inductor/resize_storage_bytes.cpp):
//    Dispatcher::registerDef throws "registered multiple times";
//  - RegisterHandler dumpHandler{"dump_traceback", ...}
//    (torch/csrc/distributed/c10d/control_plane/PythonHandlers.cpp):
//    registerHandler throws std::invalid_argument("Handler dump_traceback already registered").
// libtorch_cpu calls both through its PLT (default visibility, no -Bsymbolic),
// so a definition in the program, exported to the dynamic symbol table,
// comes first. The override skips only a registration that is the very same
// one again (same operator and same debug string "file:line"); any other
// conflict still reaches libtorch and fails as before. The same holds for a
// copied extension module's TORCH_LIBRARY (registerLibrary, below).
// Registrations from Python (torch.library, in any interpreter) go to
// python_kernels.cc instead: see python_kernel_hooks.h.

namespace {
std::atomic<int> g_skipped_definitions{0};
std::atomic<int> g_skipped_handlers{0};
}  // namespace

#if MANYPY_TORCH_HOOKS
namespace {
void* NextDefinition(const char* mangled) {
  void* next = dlsym(RTLD_NEXT, mangled);
  if (next == nullptr) {
    fprintf(stderr, "manypy: libtorch does not export %s, which manypy overrides; this libtorch "
                    "is not the one manypy was built against\n", mangled);
    abort();
  }
  return next;
}

// at::Tag became torch::headeronly::Tag (PyTorch 2.14's
// torch/headeronly/core/enum_tag.h; ATen/core/enum_tag.h keeps the old name as
// an alias), which changes the mangled names of the two functions taking tags.
#if __has_include(<torch/headeronly/core/enum_tag.h>)
constexpr const char* kRegisterDef =
    "_ZN3c1010Dispatcher11registerDefENS_14FunctionSchemaENSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEESt6vectorIN5torch10headeronly3TagESaISB_EE";
constexpr const char* kLibraryDef =
    "_ZNR5torch7Library4_defEON3c1014FunctionSchemaEPNS1_12OperatorNameERKSt6vectorINS_"
    "10headeronly3TagESaIS8_EENS_17_RegisterOrVerifyE";
#else
constexpr const char* kRegisterDef =
    "_ZN3c1010Dispatcher11registerDefENS_14FunctionSchemaENSt7__cxx1112basic_stringIcSt11char_"
    "traitsIcESaIcEEESt6vectorIN2at3TagESaISA_EE";
constexpr const char* kLibraryDef =
    "_ZNR5torch7Library4_defEON3c1014FunctionSchemaEPNS1_12OperatorNameERKSt6vectorIN2at3TagESaIS8_"
    "EENS_17_RegisterOrVerifyE";
#endif
constexpr const char* kRegisterLibrary =
    "_ZN3c1010Dispatcher15registerLibraryENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEES6_";
constexpr const char* kRegisterImpl =
    "_ZN3c1010Dispatcher12registerImplENS_12OperatorNameESt8optionalINS_11DispatchKeyEENS_14Kernel"
    "FunctionES2_INS_4impl12CppSignatureEESt10unique_ptrINS_14FunctionSchemaESt14default_deleteISA_"
    "EENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
constexpr const char* kLibraryImpl =
    "_ZNR5torch7Library5_implEPKcONS_11CppFunctionENS_17_RegisterOrVerifyE";
constexpr const char* kRegisterCustomClass =
    "_ZN5torch19registerCustomClassESt10shared_ptrIN3c109ClassTypeEE";
constexpr const char* kRegisterHandler =
    "_ZN4c10d13control_plane15registerHandlerERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaI"
    "cEEESt8functionIFvRKNS0_7RequestERNS0_8ResponseEEE";
}  // namespace

namespace c10 {
RegistrationHandleRAII Dispatcher::registerDef(FunctionSchema schema, std::string debug,
                                               std::vector<at::Tag> tags) {
  // Resolved before taking g_def_mu: dlsym takes the loader's lock, which a
  // thread inside dlopen (running static initializers) holds while it waits here.
  static auto real = reinterpret_cast<manypy::detail::RegisterDefFn>(NextDefinition(kRegisterDef));
  if (manypy::detail::IsPythonRegistration(debug)) {
    return manypy::detail::DefineFromPython(real, this, std::move(schema), std::move(debug),
                                            std::move(tags));
  }
  static manypy::Mutex g_def_mu;  // the look-up and the definition, as one step
  manypy::MutexLock lock(g_def_mu);
  if (auto op = findSchema(schema.operator_name()); op && op->debug() == debug) {
    g_skipped_definitions++;
    return RegistrationHandleRAII([] {});  // the first definition stays
  }
  return real(this, std::move(schema), std::move(debug), std::move(tags));
}

// Kernels registered from Python are routed to the calling interpreter's
// own (python_kernels.cc); every other kernel is registered as it comes.
RegistrationHandleRAII Dispatcher::registerImpl(OperatorName op_name,
                                                std::optional<DispatchKey> dispatch_key,
                                                KernelFunction kernel,
                                                std::optional<impl::CppSignature> cpp_signature,
                                                std::unique_ptr<FunctionSchema> inferred_schema,
                                                std::string debug) {
  static auto real =
      reinterpret_cast<manypy::detail::RegisterImplFn>(NextDefinition(kRegisterImpl));
  if (dispatch_key && !kernel.isFallthrough() && manypy::detail::IsPythonRegistration(debug)) {
    return manypy::detail::RouteFromPython(real, this, std::move(op_name), *dispatch_key,
                                           std::move(kernel), std::move(debug));
  }
  return real(this, std::move(op_name), dispatch_key, std::move(kernel), std::move(cpp_signature),
              std::move(inferred_schema), std::move(debug));
}

// A Python extension module copied per interpreter that opens its namespace
// with TORCH_LIBRARY (torchaudio 2.6's _torchaudio_sox: TORCH_LIBRARY(torchaudio_sox))
// opens it again from the second copy: "Only a single TORCH_LIBRARY can be
// used to register the namespace", thrown inside dlopen. Skipped when the
// earlier registration is the same one (same debug string "file:line"); the
// copy's definitions are then skipped by registerDef above and its kernels
// replace the earlier copy's (identical C++; libtorch warns once).
RegistrationHandleRAII Dispatcher::registerLibrary(std::string ns, std::string debug) {
  using Real = RegistrationHandleRAII (*)(Dispatcher*, std::string, std::string);
  static Real real = reinterpret_cast<Real>(NextDefinition(kRegisterLibrary));
  try {
    return real(this, ns, debug);
  } catch (const c10::Error& e) {
    const std::string same = "was " + debug + "; latest registration was " + debug;
    if (std::string(e.what()).find(same) == std::string::npos) throw;
    g_skipped_definitions++;
    return RegistrationHandleRAII([] {});
  }
}
}  // namespace c10

// torch.library in an interpreter whose libtorch_python copy was not the
// first loaded runs in torch::deploy's VERIFY mode: a definition or kernel
// is not registered but waited for (2 s) from the first interpreter, then an
// internal assert fails ("Expected main interpreter to define ..."). Here
// every interpreter registers; registerDef and registerImpl above make the
// repeats one definition and one route.
namespace torch {
Library& Library::_def(c10::FunctionSchema&& schema, c10::OperatorName* out_name,
                       const std::vector<at::Tag>& tags, _RegisterOrVerify) & {
  using Real = Library& (*)(Library*, c10::FunctionSchema&&, c10::OperatorName*,
                            const std::vector<at::Tag>&, _RegisterOrVerify);
  static Real real = reinterpret_cast<Real>(NextDefinition(kLibraryDef));
  return real(this, std::move(schema), out_name, tags, _RegisterOrVerify::REGISTER);
}

Library& Library::_impl(const char* name, CppFunction&& f, _RegisterOrVerify) & {
  using Real = Library& (*)(Library*, const char*, CppFunction&&, _RegisterOrVerify);
  static Real real = reinterpret_cast<Real>(NextDefinition(kLibraryImpl));
  return real(this, name, std::move(f), _RegisterOrVerify::REGISTER);
}
}  // namespace torch

#if MANYPY_TORCH_GLOBAL_INTERPRETER
// PyTorch 2.14's libtorch_python registers a TorchScript custom class at load
// (torch::class_<...>("aten", "OpaqueObject"), a static initializer): from the
// second copy on, torch::registerCustomClass throws "Custom class with name
// __torch__.torch.classes.aten.OpaqueObject is already registered" inside
// dlopen (docs/debian14.md). The first copy's class stays; any other error
// still fails. class_base's constructor calls it through libtorch_cpu's PLT.
namespace torch {
void registerCustomClass(at::ClassTypePtr class_type) {
  using Real = void (*)(at::ClassTypePtr);
  static Real real = reinterpret_cast<Real>(NextDefinition(kRegisterCustomClass));
  const std::string name = class_type->name() ? class_type->name()->qualifiedName() : "";
  try {
    real(std::move(class_type));
  } catch (const c10::Error& e) {
    if (name.empty() || std::string(e.what()).find("Custom class with name " + name +
                                                   " is already registered") == std::string::npos) {
      throw;
    }
    g_skipped_definitions++;
  }
}
}  // namespace torch
#endif

namespace c10d::control_plane {
class Request;
class Response;
using HandlerFunc = std::function<void(const Request&, Response&)>;
// Declared in torch/csrc/distributed/c10d/control_plane/Handlers.hpp, which
// libtorch-dev does not ship; the signature is the one kRegisterHandler names.
__attribute__((visibility("default"))) void registerHandler(const std::string& name, HandlerFunc f);
void registerHandler(const std::string& name, HandlerFunc f) {
  using Real = void (*)(const std::string&, HandlerFunc);
  static Real real = reinterpret_cast<Real>(NextDefinition(kRegisterHandler));
  try {
    real(name, std::move(f));
  } catch (const std::invalid_argument&) {
    g_skipped_handlers++;  // "already registered": interpreter 0's copy's handler stays
  }
}
}  // namespace c10d::control_plane
#endif  // MANYPY_TORCH_HOOKS

namespace manypy {

TorchHookCounts TorchHooks() { return {g_skipped_definitions.load(), g_skipped_handlers.load()}; }

Status CheckTorchHooksActive() {
#if MANYPY_TORCH_HOOKS
  for (const char* mangled : {kRegisterDef, kRegisterImpl, kRegisterLibrary, kLibraryDef,
                              kLibraryImpl, kRegisterHandler,
#if MANYPY_TORCH_GLOBAL_INTERPRETER
                              kRegisterCustomClass,
#endif
                             }) {
    void* bound = dlsym(RTLD_DEFAULT, mangled);
    void* ours = nullptr;
    Dl_info info;
    if (bound != nullptr && dladdr(bound, &info) != 0) ours = info.dli_fbase;
    Dl_info self;
    if (dladdr(reinterpret_cast<void*>(&CheckTorchHooksActive), &self) == 0 || ours != self.dli_fbase) {
      return FailedPrecondition(std::string("the program does not export its override of ") +
                                mangled + " (link it with manypy_interpreters' link options): "
                                "a second interpreter's libtorch_python would end the process");
    }
  }
#endif
  return manypy::Status::Ok();
}

}  // namespace manypy
