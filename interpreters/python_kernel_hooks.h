// Internal to interpreters/ (PyTorch 2.x): what torch_hooks.cc's overrides of
// the dispatcher's registration functions do with a registration made from
// Python (python_kernels.cc). Thread-safe; called under the dynamic loader's
// lock from static initializers too.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/PyInterpreter.h>

#include <string>
#include <vector>

namespace manypy::detail {

using RegisterDefFn = c10::RegistrationHandleRAII (*)(c10::Dispatcher*, c10::FunctionSchema,
                                                      std::string, std::vector<at::Tag>);
using RegisterImplFn = c10::RegistrationHandleRAII (*)(
    c10::Dispatcher*, c10::OperatorName, std::optional<c10::DispatchKey>, c10::KernelFunction,
    std::optional<c10::impl::CppSignature>, std::unique_ptr<c10::FunctionSchema>, std::string);

/// The libtorch_python copy of the interpreter the calling thread runs
/// Python in (its GIL, else its session's, else the only one it has a thread
/// state in), or null. global_py_interpreter.cc routes calls that name no
/// object so.
const c10::impl::PyInterpreter* CallingPyInterpreter();

/// Whether a definition or kernel comes from torch.library (Python).
bool IsPythonRegistration(const std::string& debug);

/// Defines `schema` unless an identical one is defined (then a no-op); a
/// different schema under the same name throws, naming both definers. The
/// definition is kept for the life of the process; the handle returned does nothing.
c10::RegistrationHandleRAII DefineFromPython(RegisterDefFn real, c10::Dispatcher* dispatcher,
                                             c10::FunctionSchema schema, std::string debug,
                                             std::vector<at::Tag> tags);

/// Records that the calling interpreter registered a Python kernel for
/// (`name`, `key`) and registers, once per pair, the router that runs each
/// interpreter's own. The handle returned does nothing.
c10::RegistrationHandleRAII RouteFromPython(RegisterImplFn real, c10::Dispatcher* dispatcher,
                                            c10::OperatorName name, c10::DispatchKey key,
                                            c10::KernelFunction kernel, std::string debug);

}  // namespace manypy::detail
