#include "interpreters/load_balancer.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace manypy {
namespace {

TEST(LoadBalancerTest, IdleInterpretersAreHandedOutFirst) {
  LoadBalancer lb(4);
  std::set<size_t> seen;
  for (int i = 0; i < 4; ++i) seen.insert(lb.Acquire());
  EXPECT_EQ(seen.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(lb.InUse(i), 1);
}

TEST(LoadBalancerTest, LeastBusyWhenNoneIdle) {
  LoadBalancer lb(2);
  lb.AcquireAt(0);
  lb.AcquireAt(0);
  lb.AcquireAt(1);
  EXPECT_EQ(lb.Acquire(), 1u);
  lb.Release(0);
  lb.Release(0);
  EXPECT_EQ(lb.Acquire(), 0u);
}

TEST(LoadBalancerTest, ReleasedInterpreterBecomesIdle) {
  LoadBalancer lb(1);
  size_t i = lb.Acquire();
  lb.Release(i);
  EXPECT_EQ(lb.InUse(i), 0);
}

TEST(LoadBalancerTest, CountsStayExactUnderConcurrency) {
  LoadBalancer lb(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int k = 0; k < 20000; ++k) lb.Release(lb.Acquire());
    });
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(lb.InUse(i), 0);
}

}  // namespace
}  // namespace manypy
