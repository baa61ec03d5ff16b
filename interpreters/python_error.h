// PythonError: what Python work in an interpreter raised (SystemExit included), as a value with
// no Python object in it; thread-safe. Sessions and objects throw it inside interpreters/ work,
// and RunPython (run_python.h) converts it, once, into the caller's status.
#pragma once

#include <stdexcept>
#include <string>

namespace manypy {

class PythonError : public std::runtime_error {
 public:
  PythonError(std::string type, std::string message, std::string traceback)
      : std::runtime_error(type.empty() ? message : type + ": " + message),
        type_(std::move(type)),
        message_(std::move(message)),
        traceback_(std::move(traceback)) {}

  /// What failed on the host side of Python work instead (a C++ exception,
  /// e.g. a Value of another kind than expected): only message() is set.
  static PythonError Host(std::string message) { return PythonError("", std::move(message), ""); }

  /// Whether a Python exception (false: Host).
  bool from_python() const { return !type_.empty(); }
  /// Qualified exception type, e.g. "ValueError" or "torch.jit.Error".
  const std::string& type() const { return type_; }
  /// str(exception)
  const std::string& message() const { return message_; }
  /// The formatted Python traceback ("Traceback (most recent call last): ...").
  const std::string& traceback() const { return traceback_; }

 private:
  std::string type_;
  std::string message_;
  std::string traceback_;
};

}  // namespace manypy
