// RunPython: the one place where what Python work raised becomes a status, so that
// no exception leaves interpreters/. Thread-safe; the work takes its own session
// (InterpreterPool::RunAt holds one for it), and the error is described without the GIL.
#pragma once

#include <exception>
#include <type_traits>
#include <utility>

#include "common/status.h"
#include "interpreters/python_error.h"

namespace manypy {

/// The default description of a failure: INTERNAL "ValueError: message".
inline Status InternalStatus(const PythonError& e) { return Internal(e.what()); }

/// A description that drops the failure (for clean-ups whose outcome is the same either way).
inline Status IgnoreError(const PythonError&) { return Status::Ok(); }

namespace detail {
template <typename T> struct PythonResult { using type = StatusOr<T>; };
template <> struct PythonResult<void> { using type = Status; };
template <> struct PythonResult<Status> { using type = Status; };
template <typename T> struct PythonResult<StatusOr<T>> { using type = StatusOr<T>; };
}  // namespace detail

/// What RunPython returns for work returning T: Status for void and Status,
/// StatusOr<T> otherwise (StatusOr<U> stays StatusOr<U>).
template <typename T>
using PythonResult = typename detail::PythonResult<T>::type;

/// Runs `work()`, which calls sessions and objects (they throw PythonError),
/// and returns its result, or `describe(error)` for what it raised: a Python
/// exception (SystemExit included: it ends the work, never the process) or a
/// C++ one from the host side (PythonError::Host). `describe` maps a
/// PythonError to the caller's status, its wording and code, and must not
/// throw; for work returning a value it must return an error status.
template <typename Work, typename Describe = Status (*)(const PythonError&)>
PythonResult<std::invoke_result_t<Work&>> RunPython(Work&& work,
                                                     Describe&& describe = InternalStatus) {
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Work&>>) {
      work();
      return Status::Ok();
    } else {
      return work();
    }
  } catch (const PythonError& e) {
    return describe(e);
  } catch (const std::exception& e) {
    return describe(PythonError::Host(e.what()));
  }
}

}  // namespace manypy
