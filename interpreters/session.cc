#include "interpreters/session.h"

#include <ATen/Parallel.h>

#include "interpreters/pool_state.h"
#include "interpreters/python_kernels.h"

namespace manypy {

Obj::Obj(const Obj& other) : shim_(other.shim_), handle_(other.handle_) {
  if (handle_ != nullptr) shim_->IncRef(handle_);
}

Obj& Obj::operator=(const Obj& other) {
  if (this != &other) {
    Obj copy(other);
    *this = std::move(copy);
  }
  return *this;
}

Obj::Obj(Obj&& other) noexcept : shim_(other.shim_), handle_(other.handle_) {
  other.handle_ = nullptr;
}

Obj& Obj::operator=(Obj&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) shim_->DecRef(handle_);
    shim_ = other.shim_;
    handle_ = other.handle_;
    other.handle_ = nullptr;
  }
  return *this;
}

Obj::~Obj() {
  if (handle_ != nullptr) shim_->DecRef(handle_);
}

shim::Handle Obj::Release() {
  shim::Handle h = handle_;
  handle_ = nullptr;
  return h;
}

Obj Obj::Attr(const std::string& name) const { return Obj(shim_, shim_->GetAttr(handle_, name)); }

bool Obj::HasAttr(const std::string& name) const { return shim_->HasAttr(handle_, name); }

Obj Obj::Call(const std::vector<Value>& args, const Kwargs& kwargs) const {
  std::vector<Obj> converted;
  converted.reserve(args.size());
  for (const auto& a : args) converted.push_back(Obj(shim_, shim_->FromValue(a)));
  return CallWith(converted, kwargs);
}

Obj Obj::CallWith(const std::vector<Obj>& args, const Kwargs& kwargs) const {
  std::vector<shim::Handle> handles;
  handles.reserve(args.size());
  for (const auto& a : args) handles.push_back(a.handle_);
  return Obj(shim_, shim_->Call(handle_, handles, kwargs));
}

Value Obj::ToValue() const { return shim_->ToValue(handle_); }

std::string Obj::Repr() const { return shim_->Repr(handle_); }

namespace detail {
InterpreterSession OpenSession(std::shared_ptr<PoolState> pool, size_t index) {
  return InterpreterSession(std::move(pool), index);
}
}  // namespace detail

InterpreterSession::InterpreterSession(std::shared_ptr<detail::PoolState> pool, size_t index)
    : pool_(std::move(pool)), index_(index), shim_(&pool_->interpreters[index]->shim()) {
  // libtorch applies its intra-op thread count (PoolOptions::intra_op_threads)
  // to a thread lazily, at its first parallel region. An OpenMP BLAS
  // (OpenBLAS's openmp build) reads the calling thread's OpenMP setting on
  // every call, so apply it before this thread runs any model: otherwise each
  // interpreter's BLAS calls would use every core and oversubscribe them.
  thread_local bool threads_applied = false;
  if (!threads_applied) {
    at::get_num_threads();  // runs at::internal::lazy_init_num_threads()
    threads_applied = true;
  }
  gil_token_ = shim_->AcquireGil();
  calling_before_ = SetCallingInterpreter(pool_->interpreters[index]->torch_interpreter());
}

InterpreterSession::InterpreterSession(InterpreterSession&& other) noexcept
    : pool_(std::move(other.pool_)),
      index_(other.index_),
      shim_(other.shim_),
      gil_token_(other.gil_token_),
      calling_before_(other.calling_before_) {}

InterpreterSession::~InterpreterSession() {
  if (pool_ == nullptr) return;  // moved from
  SetCallingInterpreter(calling_before_);
  shim_->ReleaseGil(gil_token_);
  pool_->balancer.Release(index_);
}

Obj InterpreterSession::Import(const std::string& module) {
  return Obj(shim_, shim_->Import(module));
}

Obj InterpreterSession::Global(const std::string& module, const std::string& name) {
  return Import(module).Attr(name);
}

void InterpreterSession::Exec(const std::string& source) { shim_->Exec(source); }

Obj InterpreterSession::Eval(const std::string& expression) {
  return Obj(shim_, shim_->Eval(expression));
}

Obj InterpreterSession::DefineModule(const std::string& name, const std::string& source) {
  return Global("_manypy", "define_module").Call({name, source, "<manypy:" + name + ">"});
}

size_t InterpreterSession::ReturnFreeMemory(size_t keep_cached_bytes) {
  ArenaCache* arenas = pool_->interpreters[index_]->arena_cache();
  if (arenas == nullptr) return 0;
  return arenas->Trim(keep_cached_bytes) + arenas->ReleaseFreePools();
}

Obj InterpreterSession::FromValue(const Value& value) {
  return Obj(shim_, shim_->FromValue(value));
}

}  // namespace manypy
