// ArenaCache: freed arenas are handed back, and Trim returns all but a reserve.
#include "interpreters/arena_cache.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "interpreters/pool.h"
#include "tests/test_util/pool_fixture.h"
#include "tests/test_util/resident_size.h"

namespace manypy {
namespace {

constexpr size_t kArena = 1u << 20;

TEST(ArenaCacheTest, FreedArenasAreReusedAndTrimKeepsOnlyItsReserve) {
  ArenaCache cache;
  std::vector<void*> arenas;
  for (int i = 0; i < 6; ++i) arenas.push_back(ArenaCache::Alloc(&cache, kArena));
  for (void* a : arenas) ArenaCache::Free(&cache, a, kArena);
  EXPECT_EQ(cache.cached(), 6u);
  void* again = ArenaCache::Alloc(&cache, kArena);
  EXPECT_EQ(again, arenas.back());  // the last freed, handed back
  EXPECT_EQ(cache.cached(), 5u);
  EXPECT_EQ(cache.Trim(2 * kArena), 3 * kArena);
  EXPECT_EQ(cache.cached(), 2u);
  EXPECT_EQ(cache.Trim(2 * kArena), 0u);
  ArenaCache::Free(&cache, again, kArena);
  cache.Drain();
  EXPECT_EQ(cache.cached(), 0u);
}

// Through a session: the arenas an interpreter's Python freed go back.
TEST(ArenaCacheTest, ASessionReturnsTheArenasItsPythonFreed) {
  auto pool = testing::MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->AcquireAt(0);
  s.Exec("table = {i: ('token-%d' % i, float(i)) for i in range(300000)}\ndel table\n");
  EXPECT_GE(s.ReturnFreeMemory(4 * kArena), 16 * kArena);
  EXPECT_EQ(s.Eval("len({i: str(i) for i in range(100000)})").ToValue().to_int(), 100000);
}

// A few survivors scattered through a freed table keep its arenas; the empty
// pools between them go back to the system, and the interpreter goes on
// allocating in them (and the survivors keep their values).
TEST(ArenaCacheTest, EmptyPoolsInsideArenasStillInUseGoBack) {
  constexpr size_t kKeepEveryArena = std::numeric_limits<size_t>::max();
  auto pool = testing::MakePool(1);
  ASSERT_NE(pool, nullptr);
  auto s = pool->AcquireAt(0);
  s.Exec(
      "table = {i: ('token-%d' % i, float(i)) for i in range(300000)}\n"
      "kept = [table[i] for i in range(0, 300000, 3000)]\n"
      "del table\n");
  const int64_t rss_before = testing::ResidentBytes();
  const size_t released = s.ReturnFreeMemory(kKeepEveryArena);  // the pools only
  const int64_t rss_after = testing::ResidentBytes();
  EXPECT_GE(released, 8 * kArena);
  EXPECT_GE(rss_before - rss_after, static_cast<int64_t>(released / 2));
  EXPECT_EQ(s.ReturnFreeMemory(kKeepEveryArena), 0u);  // nothing new to give back
  EXPECT_EQ(s.Eval("sum(v for _, v in kept)").ToValue().to_double(), 14850000.0);
  EXPECT_EQ(s.Eval("kept[7][0]").ToValue().to_str(), "token-21000");
  // The released pools are taken again (every size class), and work.
  s.Exec("again = {i: ('again-%d' % i, float(i), [i] * (i % 40)) for i in range(300000)}\n");
  EXPECT_EQ(s.Eval("sum(v for _, v, _ in again.values())").ToValue().to_double(), 44999850000.0);
  EXPECT_EQ(s.Eval("again[123456][0]").ToValue().to_str(), "again-123456");
  EXPECT_EQ(s.Eval("sum(len(l) for *_, l in again.values())").ToValue().to_int(), 5850000);
  s.Exec("del again\nimport gc\ngc.collect()\n");
  EXPECT_GE(s.ReturnFreeMemory(0), 16 * kArena);
}

}  // namespace
}  // namespace manypy
