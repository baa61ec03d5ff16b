// Conversions between manypy::Value and Python objects, and the single place
// where a pending Python exception becomes a C++ PythonError.
// REQUIRES: the calling thread holds this interpreter's GIL.
#pragma once

#include <Python.h>

#include "interpreters/value.h"

namespace manypy::shim {

/// New reference; raises a Python exception (returns nullptr) on failure.
PyObject* ToPython(const Value& value);

/// Throws PythonError (TypeError) for objects that have no Value form.
Value FromPython(PyObject* object);

/// Converts the pending Python exception into PythonError, clearing it so the
/// interpreter stays usable. SystemExit is converted like any other exception:
/// a model can never exit the process.
[[noreturn]] void ThrowPythonError();

/// Returns `object` or throws the pending Python exception if it is nullptr.
inline PyObject* Check(PyObject* object) {
  if (object == nullptr) ThrowPythonError();
  return object;
}

}  // namespace manypy::shim
