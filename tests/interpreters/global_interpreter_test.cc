// libtorch >= 2.9 (Debian 14's 2.14) keeps one process-global
// c10::impl::PyInterpreter instead of a per-interpreter tag on each TensorImpl
// (docs/debian14.md). What the host's own (interpreters/global_py_interpreter.h)
// must do, on the pool's mechanism (a copy of libpython and of libtorch_python
// per interpreter) without InterpreterPool:
//  - as shipped, the second copy of libtorch_python ends the process while it
//    loads: its static REGISTER_PYTHON_HOOKS registers "PyInterpreterHooks"
//    at the same priority as the first copy's, and c10::Registry::Register
//    calls std::exit(1);
//  - Interpreter::Start registers the host's first, so both copies' are
//    skipped; each call is routed to the interpreter that made the object,
//    tensors cross with no copy, each interpreter wrapping its own TensorImpl
//    and StorageImpl;
//  - one interpreter's thread dropping another's object while holding its
//    own GIL hands the decref to the owner (no deadlock), and a storage one
//    interpreter wrapped is not wrapped by a second.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "interpreters/global_py_interpreter.h"
#include "interpreters/image_preparer.h"
#include "interpreters/interpreter.h"
#include "interpreters/python_error.h"
#include "interpreters/shim/shim_api.h"
#include "interpreters/torch_hooks.h"
#include "interpreters/value.h"

#if MANYPY_TORCH_GLOBAL_INTERPRETER
#include <ATen/ATen.h>
#include <c10/core/impl/PyInterpreterHooks.h>
#endif

namespace manypy {
namespace {

#if MANYPY_TORCH_GLOBAL_INTERPRETER
constexpr int kInterpreters = 2;

// Runs `body` holding interpreter i's GIL.
template <typename F>
void WithGil(Interpreter& interpreter, int i, F body) {
  shim::InterpreterShim& shim = interpreter.shim();
  int token = shim.AcquireGil();
  try {
    body(shim);
  } catch (const PythonError& e) {
    ADD_FAILURE() << "interpreter " << i << ": " << e.what() << "\n" << e.traceback();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "interpreter " << i << ": " << e.what();
  }
  shim.ReleaseGil(token);
}

// Binds a Value to a global name in the interpreter's __main__ (GIL held).
void SetGlobal(shim::InterpreterShim& shim, const std::string& name, const Value& value) {
  shim::Handle v = shim.FromValue(value);
  shim::Handle main = shim.Import("__main__");
  shim::Handle set = shim.GetAttr(main, "__setattr__");
  shim::Handle key = shim.FromValue(Value(name));
  shim.DecRef(shim.Call(set, {key, v}, {}));
  for (shim::Handle h : {v, main, set, key}) shim.DecRef(h);
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

// As shipped: the first copy of libtorch_python registers
// "PyInterpreterHooks", the second copy's same registration ends the process
// inside dlopen. The copies are loaded here as Interpreter::Boot loads them,
// but without its host registration first.
TEST(GlobalInterpreterDeathTest, ASecondLibtorchPythonCopyEndsTheProcessAsShipped) {
  ASSERT_TRUE(CheckTorchHooksActive().ok()) << CheckTorchHooksActive().ToString();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        auto preparer = Preparer();
        for (int i = 0; i < 2; ++i) {
          auto image = preparer->PrepareInterpreter(ImagePreparer::NewSlot());
          if (!image.ok()) _exit(3);
          if (dlopen(image->libpython.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr ||
              dlopen(image->shim.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            _exit(4);
          }
          fprintf(stderr, "copy %d loaded\n", i);
        }
        _exit(0);
      },
      testing::ExitedWithCode(1),
      "copy 0 loaded.*Key already registered with the same priority: PyInterpreterHooks");
}

std::vector<std::unique_ptr<Interpreter>> StartTwo(ImagePreparer* preparer) {
  std::vector<std::unique_ptr<Interpreter>> interpreters;
  for (int i = 0; i < kInterpreters; ++i) {
    auto started = Interpreter::Start(preparer, OptionsFor(i));
    EXPECT_TRUE(started.ok()) << started.status().ToString();
    if (!started.ok()) return {};
    interpreters.push_back(std::move(*started));
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) { shim.Exec("import sys, torch\n"); });
  }
  return interpreters;
}

TEST(GlobalInterpreterTest, HostHooksRouteEachObjectToItsInterpreterAndTensorsCrossWithNoCopy) {
  // The pool's overrides of libtorch's registration functions (torch_hooks.cc:
  // a second copy's static definitions are skipped), as InterpreterPool checks.
  ASSERT_TRUE(CheckTorchHooksActive().ok()) << CheckTorchHooksActive().ToString();
  auto preparer = Preparer();
  GlobalPyInterpreterCounts start = GlobalPyInterpreterStats();
  auto interpreters = StartTwo(preparer.get());
  ASSERT_EQ(interpreters.size(), 2u);
  // Interpreter::Start registered the host's before either copy loaded.
  ASSERT_TRUE(InstallGlobalPyInterpreter().ok());
  const c10::impl::PyInterpreter* global = c10::impl::getGlobalPyInterpreter();
  for (auto& interpreter : interpreters) {
    ASSERT_NE(interpreter->torch_interpreter(), nullptr);
    ASSERT_NE(interpreter->torch_interpreter(), global);
  }

  // Both run autograd, which keeps C++ references to tensors that have
  // Python wrappers (a C++ count going 1 -> 2 increfs the wrapper through the
  // global interpreter, c10/util/intrusive_ptr.h).
  for (int i = 0; i < kInterpreters; ++i) {
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
      shim.Exec(
          "a = torch.arange(6.0, requires_grad=True)\n"
          "(a * a).sum().backward()\n"
          "grad = a.grad.tolist()\n");
      EXPECT_EQ(Eval(shim, "torch.__version__").to_str().rfind(MANYPY_TEST_TORCH_SOVERSION ".", 0), 0u);
      EXPECT_EQ(Eval(shim, "grad == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]").to_bool(), true);
    });
  }
  GlobalPyInterpreterCounts after_autograd = GlobalPyInterpreterStats();
  EXPECT_GT(after_autograd.routed, start.routed);

  // Interpreter 0's tensor to interpreter 1 through the host, with no copy.
  Value shared;
  WithGil(*interpreters[0], 0, [&](shim::InterpreterShim& shim) {
    shim.Exec("t = torch.arange(6.0)\nts = t.untyped_storage()\n");
    shared = Eval(shim, "t");
    // Neither the host's TensorImpl nor its StorageImpl is interpreter 0's.
    EXPECT_EQ(shared.to_tensor().unsafeGetTensorImpl()->pyobj_slot()->load_pyobj(), nullptr);
    EXPECT_EQ(shared.to_tensor().storage().unsafeGetStorageImpl()->pyobj_slot()->load_pyobj(),
              nullptr);
  });
  WithGil(*interpreters[1], 1, [&](shim::InterpreterShim& shim) {
    SetGlobal(shim, "u", shared);
    shim.Exec("u.mul_(10)\nv = u.view(2, 3)\n");
    EXPECT_EQ(Eval(shim, "u.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]").to_bool(), true);
  });
  std::string data0, data1;
  WithGil(*interpreters[0], 0, [&](shim::InterpreterShim& shim) {
    EXPECT_EQ(Eval(shim, "t.tolist() == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]").to_bool(), true);
    data0 = Eval(shim, "str(t.data_ptr())").to_str();
    shim.Exec("del t, ts\n");
  });
  WithGil(*interpreters[1], 1, [&](shim::InterpreterShim& shim) {
    data1 = Eval(shim, "str(u.data_ptr())").to_str();
    EXPECT_EQ(Eval(shim, "v.sum().item()").to_double(), 150.0);
    shim.Exec("del u, v\nimport gc\ngc.collect()\n");
  });
  EXPECT_EQ(data0, data1);  // the same bytes
  EXPECT_EQ(shared.to_tensor().data_ptr<float>()[5], 50.0f);
  shared = Value();
  GlobalPyInterpreterCounts end = GlobalPyInterpreterStats();
  EXPECT_GT(end.routed, after_autograd.routed);
  EXPECT_EQ(end.cross_increfs, start.cross_increfs);
  EXPECT_EQ(end.stepped_out, start.stepped_out);
  printf("calls routed by the host's PyInterpreter: %ld\n", end.routed - start.routed);
  // Interpreters are finalized by their destructors; the host's hooks stay
  // registered (libc10 caches them), routing nothing once no object is left.
  interpreters.clear();
}

// The object a thread drops may be another interpreter's: a host tensor lent
// to interpreter 0 whose storage interpreter 0 wrapped (x), and one lent to
// interpreter 1 (y). Thread 0 holds interpreter 0's GIL and drops y while
// thread 1 holds interpreter 1's and drops x: each 2 -> 1 count decrefs the
// other interpreter's storage object. Taking that GIL in place would deadlock
// (each waits for the GIL the other holds); the decrefs are handed to their
// host's decref thread instead, which drops them once the GILs are free.
TEST(GlobalInterpreterTest, DroppingAnotherInterpretersObjectWhileHoldingAGilDoesNotDeadlock) {
  auto preparer = Preparer();
  auto interpreters = StartTwo(preparer.get());
  ASSERT_EQ(interpreters.size(), 2u);
  at::Tensor lent[kInterpreters] = {at::arange(8.0), at::arange(8.0)};
  long refs[kInterpreters];
  for (int i = 0; i < kInterpreters; ++i) {
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
      SetGlobal(shim, "u", Value::LentTensor(lent[i]));
      shim.Exec("s = u.untyped_storage()\ndel u\n");
      refs[i] = Eval(shim, "sys.getrefcount(s)").to_int();
    });
    // The storage object is interpreter i's: the host's own C++ reference keeps it alive.
    EXPECT_EQ(OwnerPyInterpreter(lent[i].storage().unsafeGetStorageImpl()->pyobj_slot()->load_pyobj()),
              interpreters[i]->torch_interpreter());
  }
  GlobalPyInterpreterCounts before = GlobalPyInterpreterStats();

  std::atomic<int> holding{0};
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kInterpreters; ++i) {
    threads.emplace_back([&, i] {
      shim::InterpreterShim& shim = interpreters[i]->shim();
      int token = shim.AcquireGil();
      holding.fetch_add(1);
      while (holding.load() < kInterpreters) std::this_thread::yield();
      lent[1 - i] = at::Tensor();  // the other interpreter's storage object, 2 -> 1
      shim.ReleaseGil(token);
      done.fetch_add(1);
    });
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done.load() < kInterpreters && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done.load() < kInterpreters) {
    fprintf(stderr, "deadlock: each thread waits for the GIL the other holds\n");
    fflush(stderr);
    _exit(1);  // the threads cannot be joined
  }
  for (auto& t : threads) t.join();
  GlobalPyInterpreterCounts after = GlobalPyInterpreterStats();
  EXPECT_EQ(after.deferred_decrefs - before.deferred_decrefs, 2);

  // The decref thread drops what was handed to it, under each owner's GIL.
  for (int i = 0; i < kInterpreters; ++i) {
    long now = refs[i];
    for (int tries = 0; tries < 500 && now != refs[i] - 1; ++tries) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
        now = Eval(shim, "sys.getrefcount(s)").to_int();
      });
    }
    EXPECT_EQ(now, refs[i] - 1) << "interpreter " << i;
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
      EXPECT_EQ(Eval(shim, "s.nbytes()").to_int(), 32);
      shim.Exec("del s\n");
    });
  }
  EXPECT_EQ(after.cross_increfs, before.cross_increfs);
  interpreters.clear();
}

// Anything but a decref cannot wait: a thread holding interpreter i's GIL
// that reads the reference count of interpreter 1-i's object lets its own GIL
// go first. Both threads at once would deadlock if either waited holding one.
TEST(GlobalInterpreterTest, ACallOnAnotherInterpretersObjectStepsOutOfTheHeldGil) {
  auto preparer = Preparer();
  auto interpreters = StartTwo(preparer.get());
  ASSERT_EQ(interpreters.size(), 2u);
  at::Tensor lent[kInterpreters] = {at::arange(4.0), at::arange(4.0)};
  PyObject* storage[kInterpreters];
  for (int i = 0; i < kInterpreters; ++i) {
    WithGil(*interpreters[i], i, [&](shim::InterpreterShim& shim) {
      SetGlobal(shim, "u", Value::LentTensor(lent[i]));
      shim.Exec("s = u.untyped_storage()\n");
    });
    storage[i] = lent[i].storage().unsafeGetStorageImpl()->pyobj_slot()->load_pyobj();
    ASSERT_NE(storage[i], nullptr);
  }
  GlobalPyInterpreterCounts before = GlobalPyInterpreterStats();
  std::atomic<int> holding{0};
  std::atomic<int> done{0};
  size_t counts[kInterpreters] = {0, 0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kInterpreters; ++i) {
    threads.emplace_back([&, i] {
      shim::InterpreterShim& shim = interpreters[i]->shim();
      int token = shim.AcquireGil();
      holding.fetch_add(1);
      while (holding.load() < kInterpreters) std::this_thread::yield();
      counts[i] = (*c10::impl::getGlobalPyInterpreter())->refcnt(storage[1 - i]);
      shim.ReleaseGil(token);
      done.fetch_add(1);
    });
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (done.load() < kInterpreters && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done.load() < kInterpreters) {
    fprintf(stderr, "deadlock: each thread waits for the GIL the other holds\n");
    fflush(stderr);
    _exit(1);
  }
  for (auto& t : threads) t.join();
  GlobalPyInterpreterCounts after = GlobalPyInterpreterStats();
  EXPECT_EQ(after.stepped_out - before.stepped_out, 2);
  for (int i = 0; i < kInterpreters; ++i) {
    long expected = 0;
    WithGil(*interpreters[1 - i], 1 - i, [&](shim::InterpreterShim& shim) {
      expected = Eval(shim, "sys.getrefcount(s) - 1").to_int();  // less getrefcount's own
      shim.Exec("del u, s\n");
    });
    EXPECT_EQ(static_cast<long>(counts[i]), expected) << "interpreter " << i;
  }
  for (auto& t : lent) t = at::Tensor();
  interpreters.clear();
}

// One-wrapper rule: a storage interpreter 0 has wrapped is not wrapped by
// interpreter 1 too (its slot would hand interpreter 1 interpreter 0's object).
TEST(GlobalInterpreterTest, AStorageLentToTwoInterpretersIsRefusedByTheSecond) {
  auto preparer = Preparer();
  auto interpreters = StartTwo(preparer.get());
  ASSERT_EQ(interpreters.size(), 2u);
  at::Tensor host = at::arange(4.0);
  WithGil(*interpreters[0], 0, [&](shim::InterpreterShim& shim) {
    SetGlobal(shim, "u", Value::LentTensor(host));
    shim.Exec("s = u.untyped_storage()\n");
  });
  WithGil(*interpreters[1], 1, [&](shim::InterpreterShim& shim) {
    try {
      SetGlobal(shim, "u", Value::LentTensor(host));
      ADD_FAILURE() << "interpreter 1 wrapped interpreter 0's storage";
    } catch (const PythonError& e) {
      EXPECT_NE(std::string(e.what()).find("already wrapped by another interpreter"),
                std::string::npos)
          << e.what();
    }
    // Given as an ordinary Value it gets its own storage: fine.
    SetGlobal(shim, "w", Value(host));
    EXPECT_EQ(Eval(shim, "w.sum().item()").to_double(), 6.0);
    shim.Exec("del w\n");
  });
  WithGil(*interpreters[0], 0, [&](shim::InterpreterShim& shim) { shim.Exec("del u, s\n"); });
  host = at::Tensor();
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
