// ReplicatedObject: one logical Python object present in every interpreter of
// a pool (e.g. a model), created lazily in each by a factory. Thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "interpreters/session.h"

namespace manypy {
namespace detail {
struct PoolState;
struct ReplicatedState;
}  // namespace detail

class ReplicatedObject {
 public:
  /// Builds the object inside the session's interpreter (what it raises, as
  /// PythonError, reaches the In or Call that ran it). Runs at most once per
  /// interpreter that is actually used (it may run twice if two threads race on
  /// a fresh interpreter; the first result is kept).
  using Factory = std::function<Obj(InterpreterSession&)>;

  /// This object in the session's interpreter, created on first use.
  Obj In(InterpreterSession& session) const;
  /// Drops this object's instance in the session's interpreter (if it has
  /// one), e.g. to free it there while that interpreter serves nothing else;
  /// the next In would make it again.
  void DropIn(InterpreterSession& session) const;
  /// Acquires a session from the pool and calls the object (or its
  /// `method`); throws PythonError, as Obj::Call does (run_python.h).
  Value Call(const std::vector<Value>& args, const Kwargs& kwargs = {}) const;
  Value CallMethod(const std::string& method, const std::vector<Value>& args,
                   const Kwargs& kwargs = {}) const;
  /// How many interpreters hold an instance so far.
  size_t instances() const;

 private:
  friend class InterpreterPool;
  explicit ReplicatedObject(std::shared_ptr<detail::ReplicatedState> state)
      : state_(std::move(state)) {}
  std::shared_ptr<detail::ReplicatedState> state_;
};

}  // namespace manypy
