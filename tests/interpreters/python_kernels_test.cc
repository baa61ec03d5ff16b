// Operators and kernels registered from Python (torch.library, custom_op,
// register_fake, tensor subclasses, jagged nested tensors, meta and fake
// tensors) work in every interpreter of a pool, each kernel running in the
// interpreter that calls it (PyTorch 2.x; docs/debian13.md trap 5).
#include "interpreters/python_kernels.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "interpreters/pool.h"
#include "interpreters/python_error.h"
#include "tests/test_util/pool_fixture.h"

namespace manypy {
namespace {

bool IsTorch1() { return std::string(MANYPY_TEST_TORCH_SOVERSION)[0] == '1'; }

// A model's registering code, as a model author writes it with PyTorch 2.x;
// each interpreter counts the calls its own kernels get.
constexpr const char* kCustomOp = R"PY(
import torch, _manypy
kernel_calls = []

@torch.library.custom_op("manypy_test::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    kernel_calls.append(_manypy.index)
    return x * factor

@scale.register_fake
def _(x, factor):
    return torch.empty_like(x)

def _backward(ctx, grad):
    return grad * ctx.factor, None

def _setup(ctx, inputs, output):
    ctx.factor = inputs[1]

scale.register_autograd(_backward, setup_context=_setup)
)PY";

class PythonKernelsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (IsTorch1()) return;
    pool_ = testing::MakePool(2).release();
  }
  static void TearDownTestSuite() {
    delete pool_;
    pool_ = nullptr;
  }
  void SetUp() override {
    if (IsTorch1()) GTEST_SKIP() << "PyTorch 2.x: on 1.x the first interpreter registers alone";
    ASSERT_NE(pool_, nullptr);
  }
  static Value Eval(size_t interpreter, const std::string& expression) {
    return pool_->AcquireAt(interpreter).Eval(expression).ToValue();
  }
  static void Exec(size_t interpreter, const std::string& source) {
    pool_->AcquireAt(interpreter).Exec(source);
  }
  static InterpreterPool* pool_;
};
InterpreterPool* PythonKernelsTest::pool_ = nullptr;

// A Python expression that must be True in the interpreter it runs in.
#define EXPECT_PY(interpreter, expression) \
  EXPECT_TRUE(Eval(interpreter, expression).to_bool()) << "interpreter " << interpreter << ": " << expression

TEST_F(PythonKernelsTest, ACustomOpRunsItsOwnKernelInEveryInterpreterWithEagersResults) {
  const PythonKernelCounts before = PythonKernels();
  for (size_t i : {0, 1}) Exec(i, kCustomOp);
  const PythonKernelCounts after = PythonKernels();
  // One schema (the second interpreter's definition is the same one) and, per
  // (operator, key), one route with a kernel from each interpreter.
  EXPECT_EQ(after.definitions - before.definitions, 1);
  EXPECT_EQ(after.same_definitions - before.same_definitions, 1);
  EXPECT_EQ(after.registrations - before.registrations, 2 * (after.routes - before.routes));
  for (size_t i : {1, 0}) {
    EXPECT_PY(i, "scale(torch.arange(4.), 2.5).tolist() == [0.0, 2.5, 5.0, 7.5]");
    // The kernel that ran is this interpreter's own, once.
    EXPECT_PY(i, "kernel_calls == [_manypy.index]");
    // register_fake: shapes under FakeTensorMode, in the same interpreter.
    Exec(i, R"PY(
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():
    fake_shape = tuple(scale(torch.empty(2, 3), 2.0).shape)
)PY");
    EXPECT_PY(i, "fake_shape == (2, 3) and kernel_calls == [_manypy.index]");
    // register_autograd (a with_keyset kernel).
    EXPECT_PY(i, "(lambda x: (scale(x, 3.0).sum().backward(), x.grad.tolist())[1])"
                 "(torch.ones(2, requires_grad=True)) == [3.0, 3.0]");
  }
}

TEST_F(PythonKernelsTest, BothInterpretersCallTheirKernelsAtOnce) {
  for (size_t i : {0, 1}) {
    Exec(i, R"PY(
import torch
@torch.library.custom_op("manypy_test::offset", mutates_args=())
def offset(x: torch.Tensor) -> torch.Tensor:
    return x + 1
)PY");
  }
  std::vector<std::thread> threads;
  std::vector<int> wrong(2, 0);
  for (size_t i : {0, 1}) {
    threads.emplace_back([&, i] {
      auto session = pool_->AcquireAt(i);
      for (int k = 0; k < 300; ++k) {
        Value v = session.Eval("float(offset(torch.full((8,), " + std::to_string(k) + ".)).sum())")
                      .ToValue();
        if (v.to_double() != 8.0 * (k + 1)) wrong[i]++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong, std::vector<int>({0, 0}));
}

TEST_F(PythonKernelsTest, AnyInterpreterMayRegisterFirstWithoutWaitingForTheFirst) {
  const std::string define = R"PY(
import torch
lib = torch.library.Library("manypy_first", "DEF")
lib.define("twice(Tensor x) -> Tensor")
lib.impl("twice", lambda x: x * 2, "CPU")
)PY";
  // torch::deploy's VERIFY mode waited 2 s for interpreter 0, then failed.
  auto start = std::chrono::steady_clock::now();
  Exec(1, define);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 1.0);
  EXPECT_PY(1, "torch.ops.manypy_first.twice(torch.ones(2)).tolist() == [2.0, 2.0]");
  Exec(0, define);
  EXPECT_PY(0, "torch.ops.manypy_first.twice(torch.ones(2)).tolist() == [2.0, 2.0]");
}

TEST_F(PythonKernelsTest, AKernelOnlyAnotherInterpreterRegisteredFailsSayingWhy) {
  Exec(0, R"PY(
import torch
only = torch.library.Library("manypy_only0", "DEF")
only.define("f(Tensor x) -> Tensor")
only.impl("f", lambda x: x + 1, "CPU")
)PY");
  {
    PythonError e = testing::RaisedBy(
        [&] { Eval(1, "__import__('torch').ops.manypy_only0.f(__import__('torch').ones(1))"); });
    EXPECT_NE(std::string(e.what()).find("registered from Python by another interpreter"),
              std::string::npos)
        << e.what();
  }
  EXPECT_PY(1, "float((__import__('torch').ones(3) * 2).sum()) == 6.0");  // and it serves on
}

TEST_F(PythonKernelsTest, ADifferentSchemaUnderTheSameNameIsRefusedNamingBothDefiners) {
  {
    ScopedOperatorDefiner definer("model 'alpha' version 1");
    Exec(0, "import torch\ntorch.library.define('manypy_clash::f', '(Tensor x) -> Tensor')\n");
  }
  ScopedOperatorDefiner definer("model 'beta' version 3");
  {
    PythonError e = testing::RaisedBy([&] {
      Exec(1,
           "import torch\ntorch.library.define('manypy_clash::f', '(Tensor x, int n) -> Tensor')\n");
    });
    const std::string message = e.what();
    EXPECT_NE(message.find("model 'alpha' version 1"), std::string::npos) << message;
    EXPECT_NE(message.find("model 'beta' version 3"), std::string::npos) << message;
    EXPECT_NE(message.find("manypy_clash::f"), std::string::npos) << message;
  }
  // The same schema again is the same operator, whoever defines it.
  Exec(1, "torch.library.define('manypy_clash::f', '(Tensor x) -> Tensor')\n");
}

TEST_F(PythonKernelsTest, TorchsOwnPythonKernelsWorkInTheSecondInterpreter) {
  for (size_t i : {0, 1}) {
    // prims (Python kernels registered by torch itself).
    EXPECT_PY(i, "__import__('torch').ops.prims.sin(__import__('torch').zeros(2)).tolist() == "
                 "[0.0, 0.0]");
    // Meta tensors.
    EXPECT_PY(i, "(__import__('torch').empty(3, device='meta') + 1).shape == (3,)");
    // FakeTensorMode.
    Exec(i, R"PY(
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode():
    fake = torch.ones(2, 5) @ torch.ones(5, 4)
fake_shape = tuple(fake.shape)
)PY");
    EXPECT_PY(i, "fake_shape == (2, 4)");
    // A jagged nested tensor (torch registers its kernels from Python).
    Exec(i, R"PY(
import torch
nt = torch.nested.nested_tensor([torch.ones(2, 3), torch.ones(4, 3) * 2], layout=torch.jagged)
jagged = [t.sum().item() for t in (nt.sin() + 1).unbind()]
)PY");
    EXPECT_PY(i, "[round(v, 4) for v in jagged] == [round(6 * (1 + __import__('math').sin(1)), 4),"
                 " round(12 * (1 + __import__('math').sin(2)), 4)]");
  }
}

TEST_F(PythonKernelsTest, ATorchDispatchSubclassRunsInTheInterpreterThatMadeIt) {
  const std::string subclass = R"PY(
import torch
from torch.utils._pytree import tree_map

class Logged(torch.Tensor):
    calls = []
    @staticmethod
    def __new__(cls, data):
        return torch.Tensor._make_wrapper_subclass(cls, data.shape, dtype=data.dtype)
    def __init__(self, data):
        self.data_ = data
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(str(func))
        unwrap = lambda t: t.data_ if isinstance(t, Logged) else t
        return func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {}))

logged = (Logged(torch.ones(3)) * 4).tolist()
)PY";
  for (size_t i : {1, 0}) {
    Exec(i, subclass);
    EXPECT_PY(i, "logged == [4.0, 4.0, 4.0] and Logged.calls == ['aten.mul.Tensor']");
  }
}

TEST_F(PythonKernelsTest, TorchFuncWorksInTheSecondInterpreter) {
  for (size_t i : {1, 0}) {
    Exec(i, R"PY(
import torch
from torch.func import vmap, grad, jacrev, functional_call
x = torch.arange(6.).reshape(2, 3)
func_results = [
    vmap(torch.dot)(x, x).tolist(),
    grad(lambda t: (t ** 2).sum())(torch.tensor([1., 2.])).tolist(),
    jacrev(torch.sin)(torch.zeros(2)).tolist(),
    functional_call(torch.nn.Linear(2, 1), {"weight": torch.ones(1, 2), "bias": torch.zeros(1)},
                    (torch.tensor([[1., 2.]]),)).tolist(),
]
)PY");
    EXPECT_PY(i, "func_results == [[5.0, 50.0], [2.0, 4.0], [[1.0, 0.0], [0.0, 1.0]], [[3.0]]]");
  }
}

}  // namespace
}  // namespace manypy
