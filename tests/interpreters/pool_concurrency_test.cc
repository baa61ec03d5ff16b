// Many threads calling into a few interpreters get correct results, and the
// pool spreads them over every interpreter.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "interpreters/pool.h"
#include "interpreters/python_error.h"
#include "tests/test_util/pool_fixture.h"

namespace manypy {
namespace {

using testing::MakePool;

constexpr const char* kModel = R"PY(
import time
import torch

class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = []             # one entry per call this instance served

    def forward(self, x, k):
        # append is atomic; `+= 1` loses counts when two threads share an
        # interpreter (the least busy one once all are busy) and the GIL switches.
        self.calls.append(k)
        total = 0
        for i in range(k):          # Python-level work between tensor ops
            total += i
        # Holds its interpreter a moment, GIL released: on 2 cores only two
        # of the eight threads run at once, and calls of microseconds let
        # them find their own interpreter idle every time, so one of four
        # interpreters could serve nothing (a run of make test saw it).
        time.sleep(0.0005)
        return x * k + total

model = Scale()
)PY";

class ConcurrencyTest : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrencyTest, EightThreadsGetCorrectResults) {
  auto pool = MakePool(GetParam());
  ASSERT_NE(pool, nullptr);
  ReplicatedObject model = pool->Replicate([](InterpreterSession& s) {
    s.Exec(kModel);
    return s.Eval("model");
  });
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) {
        Status called = RunPython([&] {
          at::Tensor x = at::full({2}, static_cast<float>(t));
          int64_t mult = k % 17;
          at::Tensor y = model.Call({x, Value(mult)}).to_tensor();
          float expected = t * mult + mult * (mult - 1) / 2;
          if (y[0].item<float>() != expected || y[1].item<float>() != expected) wrong++;
        });
        if (!called.ok()) errors++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(errors.load(), 0);
  // Eight threads kept every interpreter busy: the load balancer must have
  // handed each of them work (not funnelled every call into one), and each
  // call ran exactly once, in one interpreter's own instance of the model.
  // Read before the loop below, which would create missing instances.
  EXPECT_EQ(model.instances(), pool->size());
  int64_t total = 0;
  for (size_t i = 0; i < pool->size(); ++i) {
    auto s = pool->AcquireAt(i);
    Obj calls = model.In(s).Attr("calls");
    int64_t served = s.Global("builtins", "len").CallWith({calls}).ToValue().to_int();
    EXPECT_GT(served, 0) << "interpreter " << i << " of " << pool->size() << " served no call";
    total += served;
  }
  EXPECT_EQ(total, 8 * 200);
}

INSTANTIATE_TEST_SUITE_P(TwoToFourInterpreters, ConcurrencyTest, ::testing::Values(2, 3, 4));

TEST(ConcurrencyTest, ThreadsSharingOneInterpreterTakeTurnsOnItsGil) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  {
    auto s = pool->AcquireAt(0);
    s.Exec("counter = 0\ndef bump():\n    global counter\n    counter += 1\n    return counter\n");
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 500; ++k) {
        auto s = pool->AcquireAt(0);
        s.Global("__main__", "bump").Call();
      }
    });
  }
  for (auto& t : threads) t.join();
  auto s = pool->AcquireAt(0);
  EXPECT_EQ(s.Eval("counter").ToValue().to_int(), 8 * 500);
}

TEST(ConcurrencyTest, ExceptionsInSomeThreadsDoNotDisturbOthers) {
  auto pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  ReplicatedObject f = pool->Replicate([](InterpreterSession& s) {
    s.Exec("def f(n):\n    if n % 3 == 0:\n        raise ValueError(n)\n    return n * 2\n");
    return s.Eval("f");
  });
  std::atomic<int> ok{0}, raised{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int n = t; n < 300; n += 8) {
        StatusOr<int64_t> doubled = RunPython([&] { return f.Call({Value(n)}).to_int(); },
                                              [&](const PythonError& e) {
          if (n % 3 == 0 && e.type() == "ValueError" && e.message() == std::to_string(n)) raised++;
          else wrong++;
          return Internal(e.what());
        });
        if (doubled.ok()) {
          if (*doubled == n * 2) ok++; else wrong++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(raised.load(), 100);
  EXPECT_EQ(ok.load(), 200);
}

}  // namespace
}  // namespace manypy
