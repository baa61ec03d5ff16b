// PythonError: a Python exception raised inside an interpreter, converted once
// at the interpreter boundary. No Python object survives in it; thread-safe value.
#pragma once

#include <stdexcept>
#include <string>

namespace manypy {

class PythonError : public std::runtime_error {
 public:
  PythonError(std::string type, std::string message, std::string traceback)
      : std::runtime_error(type + ": " + message),
        type_(std::move(type)),
        message_(std::move(message)),
        traceback_(std::move(traceback)) {}

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
