// Issue 56's spike: two interpreters over one libtorch >= 2.9 (Debian 14's
// 2.14), where libtorch keeps one process-global c10::impl::PyInterpreter
// instead of a per-interpreter tag on each TensorImpl (docs/debian14.md).
//
// What it shows, on the pool's own mechanism (a copy of libpython and of
// libtorch_python per interpreter, interpreters/image_preparer.cc), without
// InterpreterPool (which refuses PyTorch >= 2.9, torch_version.cc):
//  - as shipped, the second copy of libtorch_python ends the process while it
//    loads: its static REGISTER_PYTHON_HOOKS registers "PyInterpreterHooks"
//    in libc10's one PyInterpreterHooksRegistry at the same priority as the
//    first copy did, and c10::Registry::Register calls std::exit(1);
//  - a registration the host makes first, at a higher priority, turns both
//    copies' into "skipping" and makes c10::impl::getGlobalPyInterpreter()
//    the host's. Its vtable routes each call to the PyInterpreter of the copy
//    that made the object (its type's metatype chain ends at that
//    interpreter's own `type`), so both interpreters import torch and
//    exchange tensors with no copy, each wrapping its own TensorImpl and
//    StorageImpl over the same bytes.
// Only objects of the interpreters this test started are routed; anything
// else ends the test binary (abort) rather than touching the wrong runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "interpreters/image_preparer.h"
#include "interpreters/interpreter.h"
#include "interpreters/python_error.h"
#include "interpreters/shim/shim_api.h"
#include "interpreters/torch_hooks.h"
#include "interpreters/value.h"

#if MANYPY_TORCH_GLOBAL_INTERPRETER
#include <ATen/core/stack.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/PyInterpreter.h>
#include <c10/core/impl/PyInterpreterHooks.h>
#include <c10/core/impl/PyObjectSlot.h>
#endif

namespace manypy {
namespace {

#if MANYPY_TORCH_GLOBAL_INTERPRETER
constexpr int kInterpreters = 2;

// Which interpreter made an object: filled before each interpreter imports torch.
struct Owner {
  std::atomic<const void*> type_type{nullptr};  // that interpreter's `type` (PyType_Type)
  std::atomic<const c10::impl::PyInterpreter*> interpreter{nullptr};  // its copy's own
  std::atomic<long> routed{0};
};
Owner g_owners[kInterpreters];
thread_local int t_interpreter = -1;  // whose GIL this test's thread holds

// CPython's object header (3.11 .. 3.14, default build): ob_refcnt, then ob_type.
const void* TypeOf(const void* object) {
  return *reinterpret_cast<const void* const*>(static_cast<const char*>(object) + sizeof(void*));
}

[[noreturn]] void Unroutable(const char* what) {
  fprintf(stderr, "global_interpreter_test: %s of an object no interpreter of this test made\n",
          what);
  abort();
}

int OwnerIndex(const void* object) {
  const void* type = TypeOf(object);
  for (int depth = 0; depth < 8; ++depth) {  // object -> its type -> metatype ... -> `type`
    const void* meta = TypeOf(type);
    if (meta == type) break;
    type = meta;
  }
  for (int i = 0; i < kInterpreters; ++i) {
    if (g_owners[i].type_type.load(std::memory_order_acquire) == type) return i;
  }
  return -1;
}

const c10::impl::PyInterpreter& Route(const void* object, const char* what) {
  int i = object != nullptr ? OwnerIndex(object) : -1;
  if (i < 0) Unroutable(what);
  g_owners[i].routed.fetch_add(1, std::memory_order_relaxed);
  return *g_owners[i].interpreter.load(std::memory_order_acquire);
}

const c10::impl::PyInterpreter& Route(const c10::TensorImpl* self, const char* what) {
  return Route(self->pyobj_slot()->load_pyobj(), what);
}

// A call that names no object: the interpreter of the first argument that has
// a Python object, else the one whose GIL the calling thread holds.
const c10::impl::PyInterpreter& Route(const torch::jit::Stack* stack, const char* what) {
  for (const c10::IValue& v : *stack) {
    if (v.isTensor() && v.toTensor().defined()) {
      if (PyObject* object = v.unsafeToTensorImpl()->pyobj_slot()->load_pyobj()) {
        return Route(object, what);
      }
    }
  }
  if (t_interpreter < 0) Unroutable(what);
  return *g_owners[t_interpreter].interpreter.load(std::memory_order_acquire);
}

class RoutingVTable final : public c10::impl::PyInterpreterVTable {
 public:
  std::string name() const override { return "<manypy host: each object's interpreter>"; }
  void incref(PyObject* o) const override { Route(o, "incref")->incref(o); }
  void decref(PyObject* o) const override { Route(o, "decref")->decref(o); }
  bool try_incref(const c10::impl::PyObjectSlot& slot) const override {
    PyObject* o = slot.load_pyobj();
    return o != nullptr && Route(o, "try_incref")->try_incref(slot);
  }
  size_t refcnt(PyObject* o) const override { return Route(o, "refcnt")->refcnt(o); }
  c10::intrusive_ptr<c10::TensorImpl> detach(const c10::TensorImpl* self) const override {
    return Route(self, "detach")->detach(self);
  }
  void dispatch(const c10::OperatorHandle& op, torch::jit::Stack* stack) const override {
    Route(stack, "dispatch")->dispatch(op, stack);
  }
  void reportErrorCallback(PyObject* callback, c10::DispatchKey key) const override {
    Route(callback, "reportErrorCallback")->reportErrorCallback(callback, key);
  }
  void python_op_registration_trampoline(const c10::OperatorHandle& op, c10::DispatchKey key,
                                         c10::DispatchKeySet keyset, torch::jit::Stack* stack,
                                         bool with_keyset, bool with_op) const override {
    Route(stack, "python_op_registration_trampoline")
        ->python_op_registration_trampoline(op, key, keyset, stack, with_keyset, with_op);
  }
  void throw_abstract_impl_not_imported_error(std::string opname, const char* pymodule,
                                              const char* context) const override {
    torch::jit::Stack none;
    Route(&none, "throw_abstract_impl_not_imported_error")
        ->throw_abstract_impl_not_imported_error(std::move(opname), pymodule, context);
  }
  void python_dispatcher(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                         torch::jit::Stack* stack) const override {
    Route(stack, "python_dispatcher")->python_dispatcher(op, keys, stack);
  }
  bool is_contiguous(const c10::TensorImpl* self, at::MemoryFormat f) const override {
    return Route(self, "is_contiguous")->is_contiguous(self, f);
  }
  c10::SymBool sym_is_contiguous(const c10::TensorImpl* self, at::MemoryFormat f) const override {
    return Route(self, "sym_is_contiguous")->sym_is_contiguous(self, f);
  }
  bool is_strides_like(const c10::TensorImpl* self, at::MemoryFormat f) const override {
    return Route(self, "is_strides_like")->is_strides_like(self, f);
  }
  bool is_non_overlapping_and_dense(const c10::TensorImpl* self) const override {
    return Route(self, "is_non_overlapping_and_dense")->is_non_overlapping_and_dense(self);
  }
  c10::Device device(const c10::TensorImpl* self) const override {
    return Route(self, "device")->device(self);
  }
  int64_t dim(const c10::TensorImpl* self) const override { return Route(self, "dim")->dim(self); }
  c10::IntArrayRef strides(const c10::TensorImpl* self) const override {
    return Route(self, "strides")->strides(self);
  }
  c10::IntArrayRef sizes(const c10::TensorImpl* self) const override {
    return Route(self, "sizes")->sizes(self);
  }
  c10::SymIntArrayRef sym_sizes(const c10::TensorImpl* self) const override {
    return Route(self, "sym_sizes")->sym_sizes(self);
  }
  c10::Layout layout(const c10::TensorImpl* self) const override {
    return Route(self, "layout")->layout(self);
  }
  int64_t numel(const c10::TensorImpl* self) const override {
    return Route(self, "numel")->numel(self);
  }
  c10::SymInt sym_numel(const c10::TensorImpl* self) const override {
    return Route(self, "sym_numel")->sym_numel(self);
  }
  c10::SymIntArrayRef sym_strides(const c10::TensorImpl* self) const override {
    return Route(self, "sym_strides")->sym_strides(self);
  }
  c10::SymInt sym_storage_offset(const c10::TensorImpl* self) const override {
    return Route(self, "sym_storage_offset")->sym_storage_offset(self);
  }
  // GPU tracing: a CPU-only test makes no GPU events.
  void trace_gpu_event_creation(c10::DeviceType, uintptr_t) const override {}
  void trace_gpu_event_deletion(c10::DeviceType, uintptr_t) const override {}
  void trace_gpu_event_record(c10::DeviceType, uintptr_t, uintptr_t) const override {}
  void trace_gpu_event_wait(c10::DeviceType, uintptr_t, uintptr_t) const override {}
  void trace_gpu_memory_allocation(c10::DeviceType, uintptr_t) const override {}
  void trace_gpu_memory_deallocation(c10::DeviceType, uintptr_t) const override {}
  void trace_gpu_stream_creation(c10::DeviceType, uintptr_t) const override {}
  void trace_gpu_device_synchronization(c10::DeviceType) const override {}
  void trace_gpu_stream_synchronization(c10::DeviceType, uintptr_t) const override {}
  void trace_gpu_event_synchronization(c10::DeviceType, uintptr_t) const override {}
  void reset_backward_hooks(const c10::TensorImpl* self) const override {
    Route(self, "reset_backward_hooks")->reset_backward_hooks(self);
  }
};

c10::impl::PyInterpreter* HostInterpreter() {
  static auto* vtable = new RoutingVTable();
  static auto* interpreter = new c10::impl::PyInterpreter(vtable);
  return interpreter;
}

struct HostHooks final : c10::impl::PyInterpreterHooksInterface {
  c10::impl::PyInterpreter* getPyInterpreter() const override { return HostInterpreter(); }
};

// Runs `body` holding interpreter i's GIL.
template <typename F>
void WithGil(Interpreter& interpreter, int i, F body) {
  shim::InterpreterShim& shim = interpreter.shim();
  int token = shim.AcquireGil();
  t_interpreter = i;
  try {
    body(shim);
  } catch (const PythonError& e) {
    ADD_FAILURE() << "interpreter " << i << ": " << e.what() << "\n" << e.traceback();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "interpreter " << i << ": " << e.what();
  }
  t_interpreter = -1;
  shim.ReleaseGil(token);
}

Value Eval(shim::InterpreterShim& shim, const std::string& expression) {
  shim::Handle h = shim.Eval(expression);
  Value v = shim.ToValue(h);
  shim.DecRef(h);
  return v;
}

Interpreter::Options OptionsFor(int index) {
  Interpreter::Options o;
  o.index = index;
  o.owns_registrations = index == 0;
  o.python_executable = MANYPY_TEST_PYTHON_EXECUTABLE;
  return o;
}

std::unique_ptr<ImagePreparer> Preparer() {
  auto preparer = ImagePreparer::Create(
      {MANYPY_TEST_CACHE_DIR, MANYPY_LIBPYTHON_FOR_TESTS, MANYPY_TEST_SHIM_LIBRARY, "patchelf"});
  if (!preparer.ok()) {
    fprintf(stderr, "%s\n", preparer.status().ToString().c_str());
    abort();
  }
  return std::move(*preparer);
}

// As shipped: the first interpreter's copy registers "PyInterpreterHooks",
// the second copy's same registration ends the process inside dlopen.
TEST(GlobalInterpreterDeathTest, ASecondLibtorchPythonCopyEndsTheProcessAsShipped) {
  ASSERT_TRUE(CheckTorchHooksActive().ok()) << CheckTorchHooksActive().ToString();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto preparer = Preparer();
        auto first = Interpreter::Start(preparer.get(), OptionsFor(0));
        if (!first.ok()) {
          fprintf(stderr, "interpreter 0: %s\n", first.status().ToString().c_str());
          _exit(3);
        }
        fprintf(stderr, "interpreter 0 started\n");
        auto second = Interpreter::Start(preparer.get(), OptionsFor(1));
        fprintf(stderr, "interpreter 1: %s\n", second.status().ToString().c_str());
        _exit(0);
      },
      testing::ExitedWithCode(1),
      "interpreter 0 started.*Key already registered with the same priority: PyInterpreterHooks");
}

TEST(GlobalInterpreterTest, HostHooksRouteEachObjectToItsInterpreterAndTensorsCrossWithNoCopy) {
  // The pool's overrides of libtorch's registration functions (torch_hooks.cc:
  // a second copy's static definitions are skipped), as InterpreterPool checks.
  ASSERT_TRUE(CheckTorchHooksActive().ok()) << CheckTorchHooksActive().ToString();
  // Before any libtorch_python copy loads: theirs then skip ("Higher priority
  // item already registered"), and libc10 caches the host's interpreter.
  c10::impl::PyInterpreterHooksRegistry()->Register(
      "PyInterpreterHooks", [] { return std::make_unique<HostHooks>(); }, c10::REGISTRY_PREFERRED);
  ASSERT_EQ(c10::impl::getGlobalPyInterpreter(), HostInterpreter());

  auto preparer = Preparer();
  std::vector<std::unique_ptr<Interpreter>> interpreters;
  for (int i = 0; i < kInterpreters; ++i) {
    auto started = Interpreter::Start(preparer.get(), OptionsFor(i));
    ASSERT_TRUE(started.ok()) << started.status().ToString();
    interpreters.push_back(std::move(*started));
    ASSERT_NE(interpreters[i]->torch_interpreter(), nullptr);
    ASSERT_NE(interpreters[i]->torch_interpreter(), HostInterpreter());
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
      g_owners[i].type_type = reinterpret_cast<const void*>(Eval(shim, "id(type)").to_int());
    });
    g_owners[i].interpreter =
        static_cast<const c10::impl::PyInterpreter*>(interpreters[i]->torch_interpreter());
  }
  ASSERT_NE(g_owners[0].type_type.load(), g_owners[1].type_type.load());

  // Both import torch; each runs autograd, which keeps C++ references to
  // tensors that have Python wrappers (a C++ count going 1 -> 2 increfs the
  // wrapper through the global interpreter, c10/util/intrusive_ptr.h).
  for (int i = 0; i < kInterpreters; ++i) {
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
      shim.Exec(
          "import torch\n"
          "a = torch.arange(6.0, requires_grad=True)\n"
          "(a * a).sum().backward()\n"
          "grad = a.grad.tolist()\n");
      EXPECT_EQ(Eval(shim, "torch.__version__").to_str().rfind(MANYPY_TEST_TORCH_SOVERSION ".", 0), 0u);
      EXPECT_EQ(Eval(shim, "grad == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]").to_bool(), true);
    });
  }
  for (int i = 0; i < kInterpreters; ++i) EXPECT_GT(g_owners[i].routed.load(), 0) << i;

  // Interpreter 0's tensor to interpreter 1 through the host, with no copy.
  Value shared;
  WithGil(*interpreters[0], 0, [&](shim::InterpreterShim& shim) {
    shim.Exec("t = torch.arange(6.0)\n");
    shared = Eval(shim, "t");
  });
  long before = g_owners[1].routed.load();
  WithGil(*interpreters[1], 1, [&](shim::InterpreterShim& shim) {
    shim::Handle t = shim.FromValue(shared);
    shim::Handle main = shim.Import("__main__");
    shim::Handle set = shim.GetAttr(main, "__setattr__");
    shim::Handle name = shim.FromValue(Value(std::string("u")));
    shim.DecRef(shim.Call(set, {name, t}, {}));
    for (shim::Handle h : {t, main, set, name}) shim.DecRef(h);
    shim.Exec("u.mul_(10)\nv = u.view(2, 3)\n");
    EXPECT_EQ(Eval(shim, "u.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]").to_bool(), true);
  });
  std::string data0, data1;
  WithGil(*interpreters[0], 0, [&](shim::InterpreterShim& shim) {
    EXPECT_EQ(Eval(shim, "t.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]").to_bool(), true);
    data0 = Eval(shim, "str(t.data_ptr())").to_str();
    shim.Exec("del t\n");
  });
  WithGil(*interpreters[1], 1, [&](shim::InterpreterShim& shim) {
    data1 = Eval(shim, "str(u.data_ptr())").to_str();
    EXPECT_EQ(Eval(shim, "v.sum().item()").to_double(), 150.0);
    shim.Exec("del u, v\nimport gc\ngc.collect()\n");
  });
  EXPECT_EQ(data0, data1);  // the same bytes
  EXPECT_EQ(shared.to_tensor().data_ptr<float>()[5], 50.0f);
  EXPECT_GT(g_owners[1].routed.load(), before);
  shared = Value();
  printf("calls routed by the host's PyInterpreter: interpreter 0 %ld, interpreter 1 %ld\n",
         g_owners[0].routed.load(), g_owners[1].routed.load());

  // Interpreters are finalized by their destructors: host hooks stay
  // registered (libc10 caches them), routing nothing once no object is left.
  interpreters.clear();
}
#else
TEST(GlobalInterpreterTest, OnlyPyTorchFrom29HasOneGlobalInterpreter) {
  GTEST_SKIP() << "PyTorch " << MANYPY_TEST_TORCH_SOVERSION
               << " keeps a per-interpreter PyObject tag; the pool relies on that instead";
}
#endif

}  // namespace
}  // namespace manypy
