// IdleMemoryReturner (idle_memory_returner.h): which free memory it returns,
// and that its thread starts and stops.
#include "server/lifecycle/idle_memory_returner.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <thread>

namespace manypy {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(IdleMemoryReturnerTest, ReturnsWhatStayedFreeForTheWholeWindowBeyondWhatItKeeps) {
  // Not a whole window read yet: nothing.
  EXPECT_EQ(IdleMemoryReturner::ToReturn({200 * kMiB, 200 * kMiB}, 3, 16 * kMiB), 0);
  // 200 MiB free all along: all but the 16 kept.
  EXPECT_EQ(IdleMemoryReturner::ToReturn({200 * kMiB, 200 * kMiB, 200 * kMiB}, 3, 16 * kMiB),
            184 * kMiB);
  // A workload that reuses it dips within the window: only the least free counts.
  EXPECT_EQ(IdleMemoryReturner::ToReturn({200 * kMiB, 20 * kMiB, 200 * kMiB}, 3, 16 * kMiB),
            4 * kMiB);
  EXPECT_EQ(IdleMemoryReturner::ToReturn({200 * kMiB, 10 * kMiB, 200 * kMiB}, 3, 16 * kMiB), 0);
  // Only the last window's readings count.
  EXPECT_EQ(IdleMemoryReturner::ToReturn({0, 100 * kMiB, 100 * kMiB}, 2, 0), 100 * kMiB);
}

TEST(IdleMemoryReturnerTest, MemoryFreedInStagesComesBackAWindowAfterEachStage) {
  // 100 MiB free for the whole window, 300 more for the last two readings.
  std::deque<int64_t> readings{100 * kMiB, 400 * kMiB, 400 * kMiB};
  const int64_t first = IdleMemoryReturner::ToReturn(readings, 3, 16 * kMiB);
  EXPECT_EQ(first, 84 * kMiB);
  IdleMemoryReturner::Forget(readings, first);
  EXPECT_EQ(readings, (std::deque<int64_t>{16 * kMiB, 316 * kMiB, 316 * kMiB}));
  // One reading on, the second stage has been free a whole window: it comes back.
  readings.pop_front();
  readings.push_back(316 * kMiB);
  EXPECT_EQ(IdleMemoryReturner::ToReturn(readings, 3, 16 * kMiB), 300 * kMiB);
  // Never below nothing.
  IdleMemoryReturner::Forget(readings, 500 * kMiB);
  EXPECT_EQ(readings, (std::deque<int64_t>{0, 0, 0}));
}

TEST(IdleMemoryReturnerTest, StartsAndStopsPromptly) {
  const auto began = std::chrono::steady_clock::now();
  {
    auto returner = IdleMemoryReturner::Start(
        {std::chrono::milliseconds(10), std::chrono::milliseconds(30), 16 * kMiB});
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace manypy
