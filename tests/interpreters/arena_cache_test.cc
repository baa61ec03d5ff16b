// ArenaCache: freed arenas are handed back, and Trim returns all but a reserve.
#include "interpreters/arena_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "interpreters/pool.h"
#include "tests/test_util/pool_fixture.h"

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

// Through the pool: what an interpreter's Python freed goes back on request.
TEST(ArenaCacheTest, ThePoolTrimsWhatAnInterpreterFreed) {
  auto pool = testing::MakePool(1);
  ASSERT_NE(pool, nullptr);
  {
    auto s = pool->AcquireAt(0);
    s.Exec("table = {i: ('token-%d' % i, float(i)) for i in range(300000)}\ndel table\n");
  }
  EXPECT_GE(pool->TrimArenaCache(0, 4 * kArena), 16 * kArena);
  EXPECT_EQ(pool->TrimArenaCache(0, 4 * kArena), 0u);
  auto s = pool->AcquireAt(0);
  EXPECT_EQ(s.Eval("len({i: str(i) for i in range(100000)})").ToValue().to_int(), 100000);
}

}  // namespace
}  // namespace manypy
