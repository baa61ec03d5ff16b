// InterpreterSession: an RAII lease on one interpreter that holds its GIL, and
// Obj, a Python object inside it. A session belongs to the thread that made it;
// an Obj may be used only while a session on its interpreter is held.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "interpreters/shim/shim_api.h"
#include "interpreters/value.h"

namespace manypy {
class InterpreterSession;
namespace detail {
struct PoolState;
/// Opens a session on interpreter `index`; the caller has already counted it
/// in the pool's load balancer (the session uncounts it when it ends).
InterpreterSession OpenSession(std::shared_ptr<PoolState> pool, size_t index);
}  // namespace detail

using Kwargs = shim::Kwargs;

/// A reference to a Python object in one interpreter. Copying takes a new
/// reference. Must not outlive the session it came from (like multipy's Obj).
/// Its calls throw PythonError for what the Python code raised: code outside
/// interpreters/ makes them inside RunPython or InterpreterPool::RunAt
/// (run_python.h), which return it as a status.
class Obj {
 public:
  Obj(const Obj& other);
  Obj& operator=(const Obj& other);
  Obj(Obj&& other) noexcept;
  Obj& operator=(Obj&& other) noexcept;
  ~Obj();

  Obj Attr(const std::string& name) const;
  bool HasAttr(const std::string& name) const;
  /// Calls the object; arguments are converted into this interpreter.
  Obj Call(const std::vector<Value>& args = {}, const Kwargs& kwargs = {}) const;
  /// Calls the object with other objects of the same interpreter as arguments.
  Obj CallWith(const std::vector<Obj>& args, const Kwargs& kwargs = {}) const;
  Obj operator()(const std::vector<Value>& args = {}) const { return Call(args); }
  /// Converts to a Value (tensors keep their storage: no copy).
  Value ToValue() const;
  std::string Repr() const;

 private:
  friend class InterpreterSession;
  friend class ReplicatedObject;
  friend struct detail::PoolState;
  Obj(shim::InterpreterShim* shim, shim::Handle handle) : shim_(shim), handle_(handle) {}
  shim::Handle Release();

  shim::InterpreterShim* shim_ = nullptr;
  shim::Handle handle_ = nullptr;  // owned reference
};

/// Its calls throw PythonError, as Obj's do (run_python.h).
class InterpreterSession {
 public:
  InterpreterSession(InterpreterSession&& other) noexcept;
  InterpreterSession& operator=(InterpreterSession&&) = delete;
  InterpreterSession(const InterpreterSession&) = delete;
  /// Releases the GIL and the interpreter slot.
  ~InterpreterSession();

  size_t interpreter_index() const { return index_; }

  Obj Import(const std::string& module);
  /// `module.name`, importing the module first.
  Obj Global(const std::string& module, const std::string& name);
  /// Runs statements in this interpreter's __main__.
  void Exec(const std::string& source);
  /// Evaluates an expression in this interpreter's __main__.
  Obj Eval(const std::string& expression);
  Obj FromValue(const Value& value);
  /// Module `name` of this interpreter, created from `source` on first use
  /// (for Python code the host ships as text).
  Obj DefineModule(const std::string& name, const std::string& source);

  /// Returns to the system what this interpreter's Python heap holds free:
  /// the freed arenas beyond `keep_cached_bytes` kept for reuse
  /// (ArenaCache::Trim) and the empty pools' pages inside arenas still in use
  /// (ArenaCache::ReleaseFreePools); the bytes returned. For after a burst of
  /// frees, such as a model's unload and the collection that follows it.
  size_t ReturnFreeMemory(size_t keep_cached_bytes);

  /// Opens a scope in which this thread's Python code in this session can be
  /// interrupted by InterpreterPool::Interrupt(interpreter_index(), token).
  uint64_t BeginInterruptible() { return shim_->BeginInterruptible(); }
  /// Closes it; an interrupt that has not fired yet is discarded.
  void EndInterruptible(uint64_t token) { shim_->EndInterruptible(token); }

 private:
  friend class ReplicatedObject;
  friend InterpreterSession detail::OpenSession(std::shared_ptr<detail::PoolState>, size_t);
  InterpreterSession(std::shared_ptr<detail::PoolState> pool, size_t index);
  shim::InterpreterShim* shim() const { return shim_; }

  std::shared_ptr<detail::PoolState> pool_;
  size_t index_;
  shim::InterpreterShim* shim_;
  int gil_token_;
  const void* calling_before_ = nullptr;  // python_kernels.h: SetCallingInterpreter
};

}  // namespace manypy
