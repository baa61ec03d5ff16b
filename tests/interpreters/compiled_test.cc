// torch.compile (Dynamo + Inductor, PyTorch 2.x) in every interpreter of a
// pool: Inductor's kernels, compiled C++ loaded as extension modules, load in
// the interpreter that compiled them and compute eager's results; the
// interpreters share Inductor's on-disk cache.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "interpreters/pool.h"
#include "tests/test_util/pool_fixture.h"

namespace manypy {
namespace {

bool IsTorch1() { return std::string(MANYPY_TEST_TORCH_SOVERSION)[0] == '1'; }

constexpr const char* kCompiled = R"PY(
import torch
from torch._dynamo.utils import counters

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 4)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)) * 2)

net = Net().eval()
compiled = torch.compile(net)
x = torch.arange(32.).reshape(2, 16) / 32
with torch.no_grad():
    same = torch.allclose(compiled(x), net(x), atol=1e-5)
cache_hits = counters["inductor"]["fxgraph_cache_hit"]
cache_misses = counters["inductor"]["fxgraph_cache_miss"]
aot_hits = counters["aot_autograd"]["autograd_cache_hit"]
)PY";

class CompiledTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (IsTorch1()) return;
    // Every interpreter's Inductor reads it when torch._inductor.config is imported.
    cache_ = std::filesystem::temp_directory_path() /
             ("manypy-compiled-test-" + std::to_string(getpid()));
    std::filesystem::remove_all(cache_);
    setenv("TORCHINDUCTOR_CACHE_DIR", cache_.c_str(), 1);
    pool_ = testing::MakePool(2).release();
  }
  static void TearDownTestSuite() {
    delete pool_;
    pool_ = nullptr;
    if (!cache_.empty()) std::filesystem::remove_all(cache_);
  }
  void SetUp() override {
    if (IsTorch1()) GTEST_SKIP() << "torch.compile is PyTorch 2.x";
    ASSERT_NE(pool_, nullptr);
  }
  static InterpreterPool* pool_;
  static std::filesystem::path cache_;
};
InterpreterPool* CompiledTest::pool_ = nullptr;
std::filesystem::path CompiledTest::cache_;

TEST_F(CompiledTest, InductorsKernelsRunInEveryInterpreterAndTheSecondCompileIsACacheHit) {
  {
    auto first = pool_->AcquireAt(0);
    first.Exec(kCompiled);
    EXPECT_TRUE(first.Eval("same").ToValue().to_bool());
    EXPECT_EQ(first.Eval("cache_misses").ToValue().to_int(), 1);
    // The kernels are modules of this interpreter's own (a private copy that
    // names this interpreter's libpython), still reporting Inductor's file.
    EXPECT_TRUE(first.Eval("any((getattr(m, '__file__', None) or '').startswith(__import__('torch')"
                           "._inductor.codecache.cache_dir()) for m in list(__import__('sys')"
                           ".modules.values()))")
                    .ToValue()
                    .to_bool());
  }
  auto second = pool_->AcquireAt(1);
  second.Exec(kCompiled);
  EXPECT_TRUE(second.Eval("same").ToValue().to_bool());
  EXPECT_EQ(second.Eval("cache_hits").ToValue().to_int(), 1);
  EXPECT_EQ(second.Eval("cache_misses").ToValue().to_int(), 0);
  // AOTAutograd's cache too (off by default in 2.6, turned on by the pool):
  // the second interpreter does not trace the graph through AOTAutograd.
  EXPECT_EQ(second.Eval("aot_hits").ToValue().to_int(), 1);
}

}  // namespace
}  // namespace manypy
