// Behaviour of a pool: isolation, values both ways, zero-copy tensors,
// third-party and never-seen extension modules, replicated objects, shutdown.
#include "interpreters/pool.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <vector>

#include "interpreters/python_error.h"
#include "tests/test_util/pool_fixture.h"

namespace manypy {
namespace {

using testing::MakePool;

/// Whether the suite was built against PyTorch 1.x (Debian 12) rather than 2.x.
bool IsTorch1() { return std::string(MANYPY_TEST_TORCH_SOVERSION)[0] == '1'; }

TEST(PoolTest, GlobalsAndModuleAttributesAreIsolated) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  {
    auto s = pool->AcquireAt(0);
    s.Exec("secret = 41\nimport json\njson.manypy_marker = 'interp0'");
  }
  auto s1 = pool->AcquireAt(1);
  EXPECT_FALSE(s1.Eval("'secret' in globals()").ToValue().to_bool());
  EXPECT_FALSE(s1.Eval("hasattr(__import__('json'), 'manypy_marker')").ToValue().to_bool());
}

TEST(PoolTest, EachInterpreterHasItsOwnTorchModule) {
  auto pool = MakePool(3);
  ASSERT_NE(pool, nullptr);
  std::set<int64_t> torch_ids;
  std::set<std::string> torch_c_copies;
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    torch_ids.insert(s.Eval("id(__import__('torch'))").ToValue().to_int());
    torch_c_copies.insert(s.Eval("__import__('torch')._C.__spec__.origin").ToValue().to_str());
    // __file__ still names the real module, for code that looks beside it.
    EXPECT_EQ(s.Eval("__import__('torch')._C.__file__").ToValue().to_str(),
              MANYPY_TEST_TORCH_C);
  }
  EXPECT_EQ(torch_ids.size(), 3u);
  EXPECT_EQ(torch_c_copies.size(), 3u);
}

TEST(PoolTest, ValuesRoundTripBothWays) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  s.Exec("def echo(x):\n    return x\n");
  Value in = Value::Dict({
      {Value("none"), Value()},
      {Value("flag"), Value(true)},
      {Value("int"), Value(-(int64_t{1} << 50))},
      {Value("float"), Value(0.25)},
      {Value("str"), Value("héllo")},
      {Value("bytes"), Value::Bytes(std::string("\0\xff", 2))},
      {Value("list"), Value::List({Value(1), Value("two")})},
      {Value("tuple"), Value::Tuple({Value(3.0), Value::List({})})},
      {Value(7), Value("int key")},
  });
  Value out = s.Global("__main__", "echo").Call({in}).ToValue();
  EXPECT_EQ(out.DebugString(), in.DebugString());
  EXPECT_EQ(out.Find("bytes")->to_bytes(), std::string("\0\xff", 2));
  EXPECT_EQ(out.Find("tuple")->kind(), Value::Kind::kTuple);
  EXPECT_EQ(s.Eval("type(echo(True)).__name__").ToValue().to_str(), "bool");
}

TEST(PoolTest, TensorsCrossWithoutCopying) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4});
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec("import torch\ndef ptr(x):\n    return x.data_ptr()\ndef same(x):\n    return x\n");
    EXPECT_EQ(s.Global("__main__", "ptr").Call({t}).ToValue().to_int(),
              reinterpret_cast<int64_t>(t.data_ptr()));
    at::Tensor back = s.Global("__main__", "same").Call({t}).ToValue().to_tensor();
    EXPECT_EQ(back.data_ptr(), t.data_ptr());
    EXPECT_TRUE(back.equal(t));
  }
  // A tensor made in one interpreter can be handed to another.
  at::Tensor made;
  {
    auto s = pool->AcquireAt(0);
    made = s.Eval("torch.full((2,), 5.0)").ToValue().to_tensor();
  }
  auto s1 = pool->AcquireAt(1);
  EXPECT_DOUBLE_EQ(s1.Eval("lambda x: float(x.sum())").Call({made}).ToValue().to_double(), 10.0);
}

TEST(PoolTest, NumpyAndTorchvisionWorkInEveryInterpreter) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec(R"PY(
import numpy as np, torch, torchvision
a = np.arange(6, dtype=np.float32).reshape(2, 3)
t = torch.from_numpy(a) * 2
boxes = torch.tensor([[0., 0., 10., 10.], [1., 1., 11., 11.], [50., 50., 60., 60.]])
keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)
result = (float(t.sum()), keep.tolist(), np.__name__)
)PY");
    Value r = s.Eval("result").ToValue();
    EXPECT_DOUBLE_EQ(r.items()[0].to_double(), 30.0);
    EXPECT_EQ(r.items()[1].DebugString(), "[0, 2]");
  }
}

TEST(PoolTest, NeverSeenExtensionModuleGetsAPrivateCopyPerInterpreter) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  {
    auto s = pool->AcquireAt(0);
    s.Exec("import manypy_counter_ext as c\nfor _ in range(3): c.increment()");
    EXPECT_EQ(s.Eval("c.value()").ToValue().to_int(), 3);
  }
  auto s = pool->AcquireAt(1);
  s.Exec("import manypy_counter_ext as c");
  // The C static lives in each interpreter's own copy of the module.
  EXPECT_EQ(s.Eval("c.value()").ToValue().to_int(), 0);
  EXPECT_EQ(s.Eval("c.increment()").ToValue().to_int(), 1);
}

TEST(PoolTest, StdlibExtensionModulesImportEverywhere) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec("import decimal, _json, mmap, sqlite3\nv = str(decimal.Decimal('1.1') * 2)");
    EXPECT_EQ(s.Eval("v").ToValue().to_str(), "2.2");
  }
}

TEST(PoolTest, ReplicatedObjectIsCreatedLazilyInEachInterpreter) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  int factory_calls = 0;
  ReplicatedObject model = pool->Replicate([&](InterpreterSession& s) {
    ++factory_calls;
    s.Exec("import torch\ntorch.manual_seed(0)\nlin = torch.nn.Linear(4, 2)\n");
    return s.Eval("lin");
  });
  EXPECT_EQ(model.instances(), 0u);
  at::Tensor x = at::ones({1, 4});
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    outputs.push_back(model.In(s).Call({x}).ToValue().to_tensor());
    outputs.push_back(model.In(s).Call({x}).ToValue().to_tensor());
  }
  EXPECT_EQ(factory_calls, 2);
  EXPECT_EQ(model.instances(), 2u);
  for (auto& o : outputs) EXPECT_TRUE(o.allclose(outputs[0]));
  EXPECT_TRUE(model.Call({x}).to_tensor().allclose(outputs[0]));
}

TEST(PoolTest, DefineModuleCreatesTheModuleOnce) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  Obj first = s.DefineModule("host_helpers", "calls = 0\ndef double(x):\n    return 2 * x\n");
  EXPECT_EQ(first.Attr("double").Call({Value(21)}).ToValue().to_int(), 42);
  s.Exec("import host_helpers\nhost_helpers.calls = 5");
  // A second definition returns the existing module instead of re-running the source.
  Obj again = s.DefineModule("host_helpers", "calls = 0\n");
  EXPECT_EQ(again.Attr("calls").ToValue().to_int(), 5);
}

class PoolSizeTest : public ::testing::TestWithParam<int> {};

TEST_P(PoolSizeTest, StartsCallsAndShutsDown) {
  auto pool = MakePool(GetParam());
  ASSERT_NE(pool, nullptr);
  ASSERT_EQ(pool->size(), static_cast<size_t>(GetParam()));
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    EXPECT_EQ(s.Eval("__import__('_manypy').index").ToValue().to_int(), static_cast<int64_t>(i));
    EXPECT_EQ(s.Eval("int(__import__('torch').ones(3).sum())").ToValue().to_int(), 3);
  }
}

INSTANTIATE_TEST_SUITE_P(OneToFour, PoolSizeTest, ::testing::Values(1, 2, 3, 4));

TEST(PoolTest, PoolsCanBeCreatedAndDestroyedRepeatedlyInOneProcess) {
  for (int round = 0; round < 3; ++round) {
    auto pool = MakePool(2);
    ASSERT_NE(pool, nullptr);
    ReplicatedObject obj = pool->Replicate([](InterpreterSession& s) { return s.Eval("lambda: [1, 2]"); });
    EXPECT_EQ(obj.Call({}).DebugString(), "[1, 2]") << "round " << round;
  }
  // Nothing half-written is left in the cache.
  for (auto& e : std::filesystem::recursive_directory_iterator(getenv("MANYPY_CACHE_DIR")
                                                                    ? getenv("MANYPY_CACHE_DIR")
                                                                    : MANYPY_TEST_CACHE_DIR)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

// Regression: the interpreter that owns the process-global registrations is
// never finalized, and its buffered sys.stdout was lost at exit.
TEST(PoolTest, PrintedOutputOfEveryInterpreterReachesStdout) {
  ::testing::internal::CaptureStdout();
  {
    auto pool = MakePool(2);
    ASSERT_NE(pool, nullptr);
    for (size_t i = 0; i < pool->size(); ++i) {
      auto s = pool->AcquireAt(i);
      s.Exec("print('hello from interpreter', " + std::to_string(i) + ")");
    }
  }
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(out.find("hello from interpreter 0"), std::string::npos) << out;
  EXPECT_NE(out.find("hello from interpreter 1"), std::string::npos) << out;
}

TEST(PoolTest, ThreadPolicyDoesNotOversubscribe) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  EXPECT_GE(pool->options().intra_op_threads, 1);
  EXPECT_LE(static_cast<size_t>(pool->options().intra_op_threads) * pool->size(),
            std::max<size_t>(pool->size(), std::thread::hardware_concurrency()));
  auto s = pool->Acquire();
  EXPECT_EQ(s.Eval("__import__('torch').get_num_threads()").ToValue().to_int(),
            pool->options().intra_op_threads);
}

// PoolOptions::lazy_modules: imported by `import torch` but not run until
// used; then they work as if imported eagerly, in every interpreter, from
// several threads at once.
TEST(PoolTest, LazyModulesRunOnFirstUseAndThenWork) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  // Not run: lazy here, or not imported at all (torch 2.6 imports torch.onnx,
  // and numpy 2 numpy.random and numpy.ma, only on first use by themselves).
  // torch 2.x's own `import torch` reads torch.hub (torch.utils.model_zoo), so
  // it runs there whatever the pool does.
  const bool torch1 = IsTorch1();
  const std::string not_run =
      "import sys, types\n"
      "not_run = sorted(n for n in " +
      std::string("['torch.onnx', 'torch.distributions', 'numpy.random', 'numpy.ma'") +
      (torch1 ? ", 'torch.hub']" : "]") + " if type(sys.modules.get(n)) is not types.ModuleType)\n";
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec(not_run);
    EXPECT_EQ(s.Eval("','.join(not_run)").ToValue().to_str(),
              torch1 ? "numpy.ma,numpy.random,torch.distributions,torch.hub,torch.onnx"
                     : "numpy.ma,numpy.random,torch.distributions,torch.onnx");
  }
  std::vector<std::thread> users;
  std::vector<std::string> results(4);
  for (size_t t = 0; t < results.size(); ++t) {
    users.emplace_back([&, t] {
      auto s = pool->AcquireAt(t % pool->size());
      results[t] = s.Eval(
          "(lambda torch, np: '%.4f %d %s %s %s' % ("
          "torch.distributions.Normal(0.0, 1.0).log_prob(torch.tensor(0.0)).item(),"
          " np.random.default_rng(7).integers(1000) >= 0,"
          " __import__('torch.onnx.utils').onnx.utils.__name__,"
          " callable(torch.hub.load_state_dict_from_url),"
          " np.ma.masked_array([1, 2], mask=[0, 1]).sum()))"
          "(__import__('torch'), __import__('numpy'))").ToValue().to_str();
    });
  }
  for (auto& u : users) u.join();
  for (const auto& r : results) EXPECT_EQ(r, "-0.9189 1 torch.onnx.utils True 1");
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec(not_run);
    EXPECT_EQ(s.Eval("','.join(not_run)").ToValue().to_str(), "");
  }
}

// torchvision's datasets and io are lazy too: `import torchvision` (every
// torchvision model's first import) leaves them unrun, and they work when used.
TEST(PoolTest, TorchvisionDataModulesAreLazyAndWorkWhenUsed) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  const std::string not_run =
      "import sys, types, torchvision.models\n"
      "not_run = sorted(n for n in ['torchvision.datasets', 'torchvision.io', 'requests']\n"
      "                 if n in sys.modules and type(sys.modules[n]) is not types.ModuleType)\n"
      "loaded = 'requests' in sys.modules\n";
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec(not_run);
    EXPECT_EQ(s.Eval("','.join(not_run)").ToValue().to_str(), "torchvision.datasets,torchvision.io");
    EXPECT_FALSE(s.Eval("loaded").ToValue().to_bool()) << "interpreter " << i;
  }
  auto s = pool->AcquireAt(1);
  EXPECT_EQ(s.Eval("(lambda tv: '%d %s' % (len(tv.datasets.FakeData(size=3, image_size=(3, 4, 4))),"
                   " callable(tv.io.read_image)))(__import__('torchvision'))")
                .ToValue()
                .to_str(),
            "3 True");
  s.Exec(not_run);
  EXPECT_EQ(s.Eval("','.join(not_run)").ToValue().to_str(), "");
}

// Value::LentTensor: the interpreter's tensor shares the host's storage
// object, so the host giving that storage other bytes afterwards (what
// SharedMemoryViews does when a request ends) reaches a tensor the model
// kept. On PyTorch 2.x an ordinary tensor gets a storage of its own there.
TEST(PoolTest, ALentTensorSharesItsStorageWithWhatTheInterpreterKeeps) {
  auto pool = MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->Acquire();
  s.Exec("kept = []\ndef keep(x):\n    kept.append(x)\n");
  at::Tensor lent = at::ones({4});
  s.Global("__main__", "keep").Call({Value::LentTensor(lent)});
  at::DataPtr other = c10::GetCPUAllocator()->allocate(4 * sizeof(float));
  std::fill_n(static_cast<float*>(other.get()), 4, 5.0f);
  lent.storage().set_data_ptr(std::move(other));
  EXPECT_EQ(s.Eval("kept[0].sum().item()").ToValue().to_double(), 20.0);
}

// PoolOptions::lazy_functions: `from package.module import f` leaves the
// package and the module unrun and gives a stand-in; its first call runs
// them, parent first as a plain import would, and calls the real f.
TEST(PoolTest, LazyFunctionsRunTheirModuleAtTheFirstCall) {
  // As torch._dynamo.utils.is_compile_supported: a function of a module in a
  // subpackage of a top-level package that runs as usual.
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("manypy_lazy_functions_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "lazy_top" / "pkg");
  std::ofstream(dir / "lazy_top" / "__init__.py") << "import builtins\n"
                                                     "builtins.lazy_order = ['lazy_top']\n";
  std::ofstream(dir / "lazy_top" / "pkg" / "__init__.py") << "import builtins\n"
                                                            "builtins.lazy_order.append('pkg')\n"
                                                            "from . import heavy\n";
  std::ofstream(dir / "lazy_top" / "pkg" / "heavy.py") << "import builtins\n"
                                                          "builtins.lazy_order.append('heavy')\n"
                                                          "def double(x):\n    return 2 * x\n";
  std::ofstream(dir / "user_of_lazy.py") << "from lazy_top.pkg.heavy import double\n";
  PoolOptions options = testing::TestPoolOptions(2);
  options.extra_sys_path.push_back(dir.string());
  options.lazy_functions.push_back("lazy_top.pkg.heavy.double");
  auto pool = InterpreterPool::Create(options);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  for (size_t i = 0; i < (*pool)->size(); ++i) {
    auto s = (*pool)->AcquireAt(i);
    s.Exec("import builtins, sys, types, user_of_lazy");
    EXPECT_EQ(s.Eval("','.join(builtins.lazy_order)").ToValue().to_str(), "lazy_top");
    EXPECT_EQ(s.Eval("type(sys.modules['lazy_top.pkg.heavy']) is types.ModuleType").ToValue().to_bool(),
              false);
    EXPECT_EQ(s.Eval("user_of_lazy.double(21)").ToValue().to_int(), 42);
    EXPECT_EQ(s.Eval("','.join(builtins.lazy_order)").ToValue().to_str(), "lazy_top,pkg,heavy");
    EXPECT_EQ(s.Eval("user_of_lazy.double(4)").ToValue().to_int(), 8);
    EXPECT_TRUE(s.Eval("sys.modules['lazy_top.pkg.heavy'].double(1) == 2 and "
                       "type(sys.modules['lazy_top.pkg']) is types.ModuleType").ToValue().to_bool());
  }
  std::filesystem::remove_all(dir);
}

// PoolOptions::lazy_values: `from package.module import TABLE` leaves the
// module unrun and gives a stand-in; its first use (an item, an attribute,
// `in`, len, iteration) runs the module and answers as the real object.
TEST(PoolTest, LazyValuesRunTheirModuleAtTheFirstUse) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("manypy_lazy_values_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "lazy_values_top" / "pkg");
  std::ofstream(dir / "lazy_values_top" / "__init__.py") << "";
  std::ofstream(dir / "lazy_values_top" / "pkg" / "__init__.py") << "";
  std::ofstream(dir / "lazy_values_top" / "pkg" / "tables.py")
      << "import builtins\n"
         "builtins.tables_ran = getattr(builtins, 'tables_ran', 0) + 1\n"
         "TABLE = {'cuda': 'hip', 'stream': 'hipStream'}\n"
         "class Trie:\n    def export(self):\n        return '|'.join(sorted(TABLE))\n"
         "TRIE = Trie()\n";
  std::ofstream(dir / "user_of_lazy_values.py")
      << "from lazy_values_top.pkg.tables import TABLE, TRIE\n"
         "def translate(word):\n    return TABLE[word]\n";
  PoolOptions options = testing::TestPoolOptions(2);
  options.extra_sys_path.push_back(dir.string());
  options.lazy_values = {"lazy_values_top.pkg.tables.TABLE", "lazy_values_top.pkg.tables.TRIE"};
  auto pool = InterpreterPool::Create(options);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  for (size_t i = 0; i < (*pool)->size(); ++i) {
    auto s = (*pool)->AcquireAt(i);
    s.Exec("import builtins, sys, types, user_of_lazy_values as u");
    EXPECT_EQ(s.Eval("getattr(builtins, 'tables_ran', 0)").ToValue().to_int(), 0) << "interpreter " << i;
    EXPECT_EQ(s.Eval("u.translate('cuda')").ToValue().to_str(), "hip");
    EXPECT_EQ(s.Eval("builtins.tables_ran").ToValue().to_int(), 1);
    EXPECT_EQ(s.Eval("u.TRIE.export()").ToValue().to_str(), "cuda|stream");
    EXPECT_TRUE(s.Eval("'stream' in u.TABLE and len(u.TABLE) == 2 and sorted(u.TABLE) == "
                       "['cuda', 'stream'] and u.TABLE.get('x', 'y') == 'y'").ToValue().to_bool());
    // The module, once run, holds the real objects.
    EXPECT_TRUE(s.Eval("type(sys.modules['lazy_values_top.pkg.tables'].TABLE) is dict")
                    .ToValue()
                    .to_bool());
    EXPECT_EQ(s.Eval("builtins.tables_ran").ToValue().to_int(), 1);  // ran once
  }
  std::filesystem::remove_all(dir);
}

// PyTorch 2.x: interpreter 1 starts while interpreter 0 is still starting
// (once interpreter 0's `import torch` has read torch.__version__ and it
// passed), not after it (pool.cc). A preloaded module makes interpreter 0's
// start wait until interpreter 1 has run it too: a serial start cannot end.
TEST(PoolTest, OtherInterpretersStartBesideInterpreterZero) {
  if (IsTorch1()) {
    GTEST_SKIP() << "PyTorch 1.x: interpreter 0's whole start comes first, by design";
  }
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("manypy_start_beside_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "start_beside_probe.py")
      << "import _manypy, os, time\n"
         "_here = os.path.dirname(os.path.abspath(__file__))\n"
         "open(os.path.join(_here, f'started_{_manypy.index}'), 'w').close()\n"
         "if _manypy.index == 0:\n"
         "    _deadline = time.monotonic() + 60\n"
         "    while not os.path.exists(os.path.join(_here, 'started_1')):\n"
         "        if time.monotonic() > _deadline:\n"
         "            raise RuntimeError('interpreter 1 did not start beside interpreter 0')\n"
         "        time.sleep(0.01)\n";
  PoolOptions options = testing::TestPoolOptions(2);
  options.extra_sys_path.push_back(dir.string());
  options.preload_modules.push_back("start_beside_probe");
  auto pool = InterpreterPool::Create(options);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  for (size_t i = 0; i < (*pool)->size(); ++i) {
    auto s = (*pool)->AcquireAt(i);
    EXPECT_EQ(s.Eval("__import__('torch').ones(2).sum().item()").ToValue().to_double(), 2.0);
  }
  std::filesystem::remove_all(dir);
}

// The default lazy values: on PyTorch 2.x importing Inductor (a
// torch.compile'd model's first call) leaves torch.utils.hipify's CUDA-to-HIP
// tables unbuilt (0.23 s of CPU per interpreter), and what uses them works.
TEST(PoolTest, ImportingInductorDoesNotBuildTheHipTables) {
  if (IsTorch1()) {
    GTEST_SKIP() << "PyTorch 1.x has no Inductor";
  }
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec("import sys, types, torch._inductor.compile_fx, torch.utils.cpp_extension");
    EXPECT_FALSE(
        s.Eval("type(sys.modules.get('torch.utils.hipify.hipify_python')) is types.ModuleType")
            .ToValue()
            .to_bool())
        << "interpreter " << i;
    // Used (as on a ROCm build of torch), the tables are built and answer.
    EXPECT_EQ(s.Eval("__import__('torch._inductor.codegen.aoti_hipify_utils', fromlist=['x'])"
                     ".maybe_hipify_code_wrapper('cudaStream_t s; ', force_hipify=True)")
                  .ToValue()
                  .to_str(),
              "hipStream_t s; ");
    EXPECT_TRUE(s.Eval("type(sys.modules['torch.utils.hipify.hipify_python']) is types.ModuleType")
                    .ToValue()
                    .to_bool());
    // 2.6's cpp_extension from-imports GeneratedFileCleaner (a lazy function
    // here); 2.14's imports hipify_python only inside a function
    // (torch/utils/cpp_extension.py:1596), so it has no such attribute.
    if (s.Eval("hasattr(torch.utils.cpp_extension, 'GeneratedFileCleaner')").ToValue().to_bool()) {
      EXPECT_TRUE(s.Eval("torch.utils.cpp_extension.GeneratedFileCleaner(keep_intermediates=True)"
                         ".keep_intermediates")
                      .ToValue()
                      .to_bool());
    }
  }
}

// The default lazy function: on PyTorch 2.x `import torchvision` leaves
// torch._dynamo unrun (torchvision.ops.roi_align imports one function of it).
TEST(PoolTest, ImportingTorchvisionDoesNotRunTorchDynamo) {
  if (IsTorch1()) {
    GTEST_SKIP() << "PyTorch 1.x has no torch._dynamo";
  }
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec("import sys, types, torchvision");
    EXPECT_FALSE(s.Eval("type(sys.modules['torch._dynamo']) is types.ModuleType").ToValue().to_bool())
        << "interpreter " << i;
    // Called, the stand-in runs torch._dynamo and answers as the real function.
    EXPECT_EQ(s.Eval("sys.modules['torchvision.ops.roi_align'].is_compile_supported('cpu') == "
                     "sys.modules['torch._dynamo.utils'].is_compile_supported('cpu')")
                  .ToValue()
                  .to_bool(),
              true);
    EXPECT_TRUE(s.Eval("type(sys.modules['torch._dynamo']) is types.ModuleType").ToValue().to_bool());
  }
}

// torchvision.models.densenet imports torch.utils.checkpoint, which on 2.x
// imports torch.fx's symbolic shapes and sympy (about 30 MiB per
// interpreter); PoolOptions::lazy_modules keeps it from running until used.
TEST(PoolTest, ImportingTorchvisionModelsDoesNotImportSympy) {
  if (IsTorch1()) {
    GTEST_SKIP() << "PyTorch 1.x's torch.utils.checkpoint does not import sympy";
  }
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    s.Exec("import sys, torchvision.models");
    EXPECT_FALSE(s.Eval("'sympy' in sys.modules").ToValue().to_bool()) << "interpreter " << i;
    // Used, the module runs and is the real one.
    EXPECT_TRUE(s.Eval("callable(torchvision.models.densenet.cp.checkpoint)").ToValue().to_bool());
    EXPECT_TRUE(s.Eval("'sympy' in sys.modules").ToValue().to_bool()) << "interpreter " << i;
  }
}

// What the pool makes lazy (PoolOptions::lazy_modules, lazy_functions and,
// on 1.x, torch._meta_registrations) must never change what a public API
// computes: one call into each public submodule, in the second interpreter,
// against Debian's python3 running the same script (2.x's torch.func failed
// in interpreter 1 while torch._meta_registrations was lazy there).
TEST(PoolTest, PublicTorchApisGiveInTheSecondInterpreterWhatPythonGives) {
  const std::string script = std::string(MANYPY_TEST_DATA_DIR) + "/public_torch_apis.py";
  std::ifstream in(script);
  ASSERT_TRUE(in) << script;
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string expected;
  {
    FILE* python = popen((std::string(MANYPY_TEST_PYTHON_EXECUTABLE) + " " + script).c_str(), "r");
    ASSERT_NE(python, nullptr);
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof(buffer), python)) expected.append(buffer, n);
    ASSERT_EQ(pclose(python), 0) << expected;
  }
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  ASSERT_EQ(expected.find("error: "), std::string::npos) << "fails in plain Python: " << expected;
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  auto s = pool->AcquireAt(1);
  std::string got = s.DefineModule("public_torch_apis", source).Attr("results").Call().ToValue()
                        .to_str();
  EXPECT_EQ(got, expected);
}

}  // namespace
}  // namespace manypy
