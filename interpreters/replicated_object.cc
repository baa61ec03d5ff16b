#include "interpreters/replicated_object.h"

#include <atomic>

#include "interpreters/pool_state.h"

namespace manypy {
namespace detail {

struct ReplicatedState {
  ReplicatedState(std::shared_ptr<PoolState> p, ReplicatedObject::Factory f)
      : pool(std::move(p)), factory(std::move(f)), handles(pool->interpreters.size(), nullptr) {}
  ~ReplicatedState() {
    for (size_t i = 0; i < handles.size(); ++i) {
      if (handles[i] == nullptr) continue;
      pool->balancer.AcquireAt(i);
      InterpreterSession session = OpenSession(pool, i);
      pool->interpreters[i]->shim().DecRef(handles[i]);
    }
  }

  const std::shared_ptr<PoolState> pool;
  const ReplicatedObject::Factory factory;
  // handles[i] is read and written only under interpreter i's GIL.
  std::vector<shim::Handle> handles;
  std::atomic<size_t> instances{0};
};

std::shared_ptr<ReplicatedState> MakeReplicatedState(std::shared_ptr<PoolState> pool,
                                                     ReplicatedObject::Factory factory) {
  return std::make_shared<ReplicatedState>(std::move(pool), std::move(factory));
}

}  // namespace detail

Obj ReplicatedObject::In(InterpreterSession& session) const {
  shim::Handle& slot = state_->handles[session.interpreter_index()];
  if (slot == nullptr) {
    Obj made = state_->factory(session);
    // The factory may have released the GIL (imports do); keep the first instance.
    if (slot == nullptr) {
      slot = made.Release();
      state_->instances++;
    }
  }
  session.shim()->IncRef(slot);
  return Obj(session.shim(), slot);
}

void ReplicatedObject::DropIn(InterpreterSession& session) const {
  shim::Handle& slot = state_->handles[session.interpreter_index()];
  if (slot == nullptr) return;
  session.shim()->DecRef(slot);
  slot = nullptr;
  state_->instances--;
}

Value ReplicatedObject::Call(const std::vector<Value>& args, const Kwargs& kwargs) const {
  size_t index = state_->pool->balancer.Acquire();
  InterpreterSession session = detail::OpenSession(state_->pool, index);
  return In(session).Call(args, kwargs).ToValue();
}

Value ReplicatedObject::CallMethod(const std::string& method, const std::vector<Value>& args,
                                   const Kwargs& kwargs) const {
  size_t index = state_->pool->balancer.Acquire();
  InterpreterSession session = detail::OpenSession(state_->pool, index);
  return In(session).Attr(method).Call(args, kwargs).ToValue();
}

size_t ReplicatedObject::instances() const { return state_->instances.load(); }

}  // namespace manypy
