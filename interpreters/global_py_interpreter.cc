#include "interpreters/global_py_interpreter.h"

#include <ATen/core/stack.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/PyInterpreter.h>
#include <c10/core/impl/PyInterpreterHooks.h>
#include <c10/core/impl/PyObjectSlot.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "interpreters/python_kernel_hooks.h"

namespace manypy {
namespace {

using c10::impl::PyInterpreter;

// Interpreters are added, never removed: a finalized interpreter's library
// copies stay mapped (Interpreter::Boot never closes them), so its type
// address is never reused and its copy still answers (dropping nothing).
// Members are published by g_count (release) and read without a lock.
constexpr int kMaxMembers = 4096;

struct Member {
  GlobalInterpreterMember info;  // constant once published
  std::atomic<bool> left{false};
  std::vector<PyObject*> queue;  // guarded by g_queue_mu
};
Member g_members[kMaxMembers];
std::atomic<int> g_count{0};
Mutex g_join_mu;  // serializes JoinGlobalPyInterpreter

// Deferred decrefs: queued under g_queue_mu (never held while waiting for a
// GIL), dropped by one process-lifetime thread that holds no GIL. Heap
// objects never destroyed: the thread may still wait on them at exit.
std::mutex& g_queue_mu = *new std::mutex();
std::condition_variable& g_queued = *new std::condition_variable();
std::condition_variable& g_drained = *new std::condition_variable();
bool g_drainer_started = false;     // guarded by g_queue_mu
const Member* g_draining = nullptr;  // guarded by g_queue_mu: whose objects are being dropped

// REQUIRES: `lock` holds g_queue_mu; released while the objects are dropped.
void DrainMember(Member& m, std::unique_lock<std::mutex>& lock) {
  std::vector<PyObject*> drop;
  drop.swap(m.queue);
  g_draining = &m;
  lock.unlock();
  for (PyObject* o : drop) {
    (*static_cast<const c10::impl::PyInterpreter*>(m.info.py_interpreter))->decref(o);
  }
  lock.lock();
  g_draining = nullptr;
  g_drained.notify_all();
}

[[noreturn]] void DrainForever() {
  std::unique_lock<std::mutex> lock(g_queue_mu);
  while (true) {
    bool any = false;
    for (int i = 0; i < g_count.load(std::memory_order_acquire); ++i) {
      if (!g_members[i].queue.empty()) {
        any = true;
        DrainMember(g_members[i], lock);  // takes that member's GIL: this thread holds none
      }
    }
    if (!any) g_queued.wait(lock);
  }
}

std::atomic<long> g_routed{0};
std::atomic<long> g_deferred{0};
std::atomic<long> g_stepped_out{0};
std::atomic<long> g_cross_increfs{0};

const PyInterpreter& CopyOf(const Member& m) {
  return *static_cast<const PyInterpreter*>(m.info.py_interpreter);
}

// CPython's object header (3.11 .. 3.14, default build): ob_refcnt, then ob_type.
const void* TypeOf(const void* object) {
  return *reinterpret_cast<const void* const*>(static_cast<const char*>(object) + sizeof(void*));
}

// object -> its type -> its metatype ... -> the runtime's `type`, whose type is itself.
const void* RootType(const void* object) {
  const void* type = TypeOf(object);
  for (int depth = 0; depth < 16; ++depth) {
    const void* meta = TypeOf(type);
    if (meta == type) return type;
    type = meta;
  }
  return nullptr;
}

Member* MemberOfObject(const void* object) {
  if (object == nullptr) return nullptr;
  const void* root = RootType(object);
  for (int i = g_count.load(std::memory_order_acquire) - 1; i >= 0; --i) {
    if (g_members[i].info.type_type == root) return &g_members[i];
  }
  return nullptr;
}

Member* MemberOfInterpreter(const PyInterpreter* interpreter) {
  if (interpreter == nullptr) return nullptr;
  for (int i = g_count.load(std::memory_order_acquire) - 1; i >= 0; --i) {
    if (g_members[i].info.py_interpreter == interpreter) return &g_members[i];
  }
  return nullptr;
}

[[noreturn]] void Unroutable(const char* what) {
  fprintf(stderr,
          "manypy: libtorch asked for %s of a Python object that no interpreter of this process "
          "made; stopping rather than touching the wrong Python runtime\n",
          what);
  abort();
}

// The live member other than `except` whose GIL the calling thread holds, or null.
Member* HeldElsewhere(const Member* except) {
  for (int i = g_count.load(std::memory_order_acquire) - 1; i >= 0; --i) {
    Member& m = g_members[i];
    if (&m == except || m.left.load(std::memory_order_acquire)) continue;
    if (m.info.thread_state() == 2) return &m;
  }
  return nullptr;
}

bool HoldsGilOf(const Member& m) {
  return !m.left.load(std::memory_order_acquire) && m.info.thread_state() == 2;
}

// Runs `call` (which takes `target`'s GIL itself) so that the calling thread
// never waits for it while holding another interpreter's GIL.
template <typename F>
auto OnOwner(Member& target, F&& call) -> decltype(call()) {
  g_routed.fetch_add(1, std::memory_order_relaxed);
  if (HoldsGilOf(target)) return call();
  Member* held = HeldElsewhere(&target);
  if (held == nullptr) return call();
  g_stepped_out.fetch_add(1, std::memory_order_relaxed);
  void* state = held->info.save_thread();
  struct Retake {
    Member* held;
    void* state;
    ~Retake() { held->info.restore_thread(state); }
  } retake{held, state};
  return call();
}

Member& Owner(const void* object, const char* what) {
  Member* m = MemberOfObject(object);
  if (m == nullptr) Unroutable(what);
  return *m;
}

Member& Owner(const c10::TensorImpl* self, const char* what) {
  return Owner(self->pyobj_slot()->load_pyobj(), what);
}

// A call that names no object: as python_kernels.cc's Router decides.
Member& OwnerOfCall(const torch::jit::Stack* stack, const char* what) {
  if (int64_t modes = c10::impl::TorchDispatchModeTLS::stack_len(); modes > 0) {
    const PyInterpreter* mode =
        &c10::impl::TorchDispatchModeTLS::get_stack_at(modes - 1)->pyinterpreter();
    if (Member* m = MemberOfInterpreter(mode)) return *m;
  }
  if (stack != nullptr) {
    auto wrapped = [](const c10::IValue& v) -> Member* {
      if (!v.isTensor()) return nullptr;
      return MemberOfObject(v.unsafeToTensorImpl()->pyobj_slot()->load_pyobj());
    };
    for (const c10::IValue& v : *stack) {
      if (Member* m = wrapped(v)) return *m;
      if (v.isTensorList() || v.isOptionalTensorList()) {
        for (const c10::IValue& element : v.toListRef()) {
          if (Member* m = wrapped(element)) return *m;
        }
      }
    }
  }
  if (Member* m = MemberOfInterpreter(detail::CallingPyInterpreter())) return *m;
  Unroutable(what);
}

void Decref(PyObject* o) {
  Member& owner = Owner(o, "decref");
  g_routed.fetch_add(1, std::memory_order_relaxed);
  if (!HoldsGilOf(owner) && HeldElsewhere(&owner) != nullptr) {
    std::lock_guard<std::mutex> lock(g_queue_mu);
    if (!owner.left.load(std::memory_order_relaxed)) {
      owner.queue.push_back(o);
      g_deferred.fetch_add(1, std::memory_order_relaxed);
      if (!g_drainer_started) {
        g_drainer_started = true;
        std::thread(DrainForever).detach();
      }
      g_queued.notify_one();
      return;
    }
  }
  // This thread holds the owner's GIL or none, or the owner is finalizing
  // (its copy then drops nothing).
  CopyOf(owner)->decref(o);
}

#define MANYPY_BY_SELF(method, ...)                       \
  Member& m = Owner(self, #method);                       \
  return OnOwner(m, [&] { return CopyOf(m)->method(__VA_ARGS__); })

class RoutingVTable final : public c10::impl::PyInterpreterVTable {
 public:
  std::string name() const override { return "<manypy: each object's own interpreter>"; }
  void incref(PyObject* o) const override {
    Member& m = Owner(o, "incref");
    if (!HoldsGilOf(m) && HeldElsewhere(&m) != nullptr) {
      // Another interpreter's code took a C++ reference to this one's object:
      // the one-wrapper rule is broken somewhere (global_py_interpreter.h).
      g_cross_increfs.fetch_add(1, std::memory_order_relaxed);
#ifndef NDEBUG
      fprintf(stderr, "manypy: an interpreter's thread took a reference to another's object\n");
      abort();
#endif
    }
    OnOwner(m, [&] { CopyOf(m)->incref(o); });
  }
  void decref(PyObject* o) const override { Decref(o); }
  bool try_incref(const c10::impl::PyObjectSlot& slot) const override {
    PyObject* o = slot.load_pyobj();
    if (o == nullptr) return false;
    Member& m = Owner(o, "try_incref");
    return OnOwner(m, [&] { return CopyOf(m)->try_incref(slot); });
  }
  size_t refcnt(PyObject* o) const override {
    Member& m = Owner(o, "refcnt");
    return OnOwner(m, [&] { return CopyOf(m)->refcnt(o); });
  }
  c10::intrusive_ptr<c10::TensorImpl> detach(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(detach, self);
  }
  void dispatch(const c10::OperatorHandle& op, torch::jit::Stack* stack) const override {
    Member& m = OwnerOfCall(stack, "dispatch");
    OnOwner(m, [&] { CopyOf(m)->dispatch(op, stack); });
  }
  void reportErrorCallback(PyObject* callback, c10::DispatchKey key) const override {
    Member& m = Owner(callback, "reportErrorCallback");
    OnOwner(m, [&] { CopyOf(m)->reportErrorCallback(callback, key); });
  }
  void python_op_registration_trampoline(const c10::OperatorHandle& op, c10::DispatchKey key,
                                         c10::DispatchKeySet keyset, torch::jit::Stack* stack,
                                         bool with_keyset, bool with_op) const override {
    Member& m = OwnerOfCall(stack, "python_op_registration_trampoline");
    OnOwner(m, [&] {
      CopyOf(m)->python_op_registration_trampoline(op, key, keyset, stack, with_keyset, with_op);
    });
  }
  void throw_abstract_impl_not_imported_error(std::string opname, const char* pymodule,
                                              const char* context) const override {
    Member& m = OwnerOfCall(nullptr, "throw_abstract_impl_not_imported_error");
    OnOwner(m, [&] {
      CopyOf(m)->throw_abstract_impl_not_imported_error(std::move(opname), pymodule, context);
    });
  }
  void python_dispatcher(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                         torch::jit::Stack* stack) const override {
    Member& m = OwnerOfCall(stack, "python_dispatcher");
    OnOwner(m, [&] { CopyOf(m)->python_dispatcher(op, keys, stack); });
  }
  bool is_contiguous(const c10::TensorImpl* self, at::MemoryFormat f) const override {
    MANYPY_BY_SELF(is_contiguous, self, f);
  }
  c10::SymBool sym_is_contiguous(const c10::TensorImpl* self, at::MemoryFormat f) const override {
    MANYPY_BY_SELF(sym_is_contiguous, self, f);
  }
  bool is_strides_like(const c10::TensorImpl* self, at::MemoryFormat f) const override {
    MANYPY_BY_SELF(is_strides_like, self, f);
  }
  bool is_non_overlapping_and_dense(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(is_non_overlapping_and_dense, self);
  }
  c10::Device device(const c10::TensorImpl* self) const override { MANYPY_BY_SELF(device, self); }
  int64_t dim(const c10::TensorImpl* self) const override { MANYPY_BY_SELF(dim, self); }
  c10::IntArrayRef strides(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(strides, self);
  }
  c10::IntArrayRef sizes(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(sizes, self);
  }
  c10::SymIntArrayRef sym_sizes(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(sym_sizes, self);
  }
  c10::Layout layout(const c10::TensorImpl* self) const override { MANYPY_BY_SELF(layout, self); }
  int64_t numel(const c10::TensorImpl* self) const override { MANYPY_BY_SELF(numel, self); }
  c10::SymInt sym_numel(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(sym_numel, self);
  }
  c10::SymIntArrayRef sym_strides(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(sym_strides, self);
  }
  c10::SymInt sym_storage_offset(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(sym_storage_offset, self);
  }
  void reset_backward_hooks(const c10::TensorImpl* self) const override {
    MANYPY_BY_SELF(reset_backward_hooks, self);
  }

  // GPU tracing callbacks (torch.cuda._gpu_trace) belong to the calling
  // interpreter; a thread in none (a host thread) has no callbacks to fire.
#define MANYPY_TRACE(method, params, args)                                       \
  void method params const override {                                           \
    Member* m = MemberOfInterpreter(detail::CallingPyInterpreter());            \
    if (m != nullptr) OnOwner(*m, [&] { CopyOf(*m)->method args; });            \
  }
  MANYPY_TRACE(trace_gpu_event_creation, (c10::DeviceType t, uintptr_t e), (t, e))
  MANYPY_TRACE(trace_gpu_event_deletion, (c10::DeviceType t, uintptr_t e), (t, e))
  MANYPY_TRACE(trace_gpu_event_record, (c10::DeviceType t, uintptr_t e, uintptr_t s), (t, e, s))
  MANYPY_TRACE(trace_gpu_event_wait, (c10::DeviceType t, uintptr_t e, uintptr_t s), (t, e, s))
  MANYPY_TRACE(trace_gpu_memory_allocation, (c10::DeviceType t, uintptr_t p), (t, p))
  MANYPY_TRACE(trace_gpu_memory_deallocation, (c10::DeviceType t, uintptr_t p), (t, p))
  MANYPY_TRACE(trace_gpu_stream_creation, (c10::DeviceType t, uintptr_t s), (t, s))
  MANYPY_TRACE(trace_gpu_device_synchronization, (c10::DeviceType t), (t))
  MANYPY_TRACE(trace_gpu_stream_synchronization, (c10::DeviceType t, uintptr_t s), (t, s))
  MANYPY_TRACE(trace_gpu_event_synchronization, (c10::DeviceType t, uintptr_t e), (t, e))
#undef MANYPY_TRACE
};
#undef MANYPY_BY_SELF

// Lives for the process: libc10 caches it and objects may be released at exit.
PyInterpreter* HostInterpreter() {
  static auto* interpreter = new PyInterpreter(new RoutingVTable());
  return interpreter;
}

struct HostHooks final : c10::impl::PyInterpreterHooksInterface {
  PyInterpreter* getPyInterpreter() const override { return HostInterpreter(); }
};

}  // namespace

Status InstallGlobalPyInterpreter() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Higher than REGISTER_PYTHON_HOOKS's default: each copy's registration
    // is then skipped ("Higher priority item already registered").
    c10::impl::PyInterpreterHooksRegistry()->Register(
        "PyInterpreterHooks", [] { return std::make_unique<HostHooks>(); },
        c10::REGISTRY_PREFERRED);
  });
  if (c10::impl::getGlobalPyInterpreter() != HostInterpreter()) {
    return FailedPrecondition(
        "libtorch's global Python interpreter was chosen before manypy registered its own "
        "(c10::impl::getGlobalPyInterpreter caches the first answer): nothing may load "
        "libtorch_python before the interpreter pool starts");
  }
  return Status::Ok();
}

bool JoinGlobalPyInterpreter(const GlobalInterpreterMember& member) {
  MutexLock lock(g_join_mu);
  int id = g_count.load(std::memory_order_relaxed);
  if (id >= kMaxMembers) return false;
  g_members[id].info = member;
  g_count.store(id + 1, std::memory_order_release);
  return true;
}

void LeaveGlobalPyInterpreter(const void* py_interpreter) {
  Member* m = MemberOfInterpreter(static_cast<const PyInterpreter*>(py_interpreter));
  if (m == nullptr) return;
  std::unique_lock<std::mutex> lock(g_queue_mu);
  m->left.store(true, std::memory_order_release);
  // Not finalized under the decref thread's feet.
  g_drained.wait(lock, [m] { return g_draining != m; });
  DrainMember(*m, lock);  // nothing is queued for it after `left`
}

const void* OwnerPyInterpreter(const void* pyobject) {
  Member* m = MemberOfObject(pyobject);
  return m == nullptr ? nullptr : m->info.py_interpreter;
}

GlobalPyInterpreterCounts GlobalPyInterpreterStats() {
  return {g_routed.load(), g_deferred.load(), g_stepped_out.load(), g_cross_increfs.load()};
}

}  // namespace manypy
