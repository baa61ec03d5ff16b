// BackgroundThread: tasks run in order on one lower-priority thread, each
// caller gets its own task's exception, and nothing queued is dropped at stop.
#include "server/lifecycle/background_thread.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

namespace manypy {
namespace {

int ThisThreadsNice() {
  return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
}

TEST(BackgroundThreadTest, RunsEachTaskOnOneNicerThreadAndWaitsForIt) {
  const int caller_nice = ThisThreadsNice();
  BackgroundThread background("test-background", 5);
  std::vector<std::thread::id> ids;
  std::vector<int> nices;
  for (int i = 0; i < 3; ++i) {
    background.Run([&] {
      ids.push_back(std::this_thread::get_id());
      nices.push_back(ThisThreadsNice());
    });
    EXPECT_EQ(ids.size(), static_cast<size_t>(i + 1)) << "Run returned before its task ran";
  }
  EXPECT_NE(ids[0], std::this_thread::get_id());
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);
  for (int nice : nices) EXPECT_EQ(nice, std::min(caller_nice + 5, 19));
  EXPECT_EQ(ThisThreadsNice(), caller_nice) << "the caller's priority changed";
}

TEST(BackgroundThreadTest, ATaskThatThrowsReachesItsCallerAndTheThreadRunsOn) {
  BackgroundThread background("test-background");
  EXPECT_THROW(background.Run([] { throw std::runtime_error("load failed"); }),
               std::runtime_error);
  bool ran = false;
  background.Run([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(BackgroundThreadTest, CallersFromManyThreadsEachGetTheirTaskRunOnce) {
  std::atomic<int> runs{0};
  {
    BackgroundThread background("test-background");
    std::vector<std::thread> callers;
    for (int i = 0; i < 8; ++i) {
      callers.emplace_back([&] {
        for (int j = 0; j < 50; ++j) background.Run([&] { runs++; });
      });
    }
    for (auto& c : callers) c.join();
  }
  EXPECT_EQ(runs.load(), 400);
}

TEST(BackgroundThreadTest, LoweringThePriorityIsCappedAt19) {
  std::thread t([] {
    EXPECT_TRUE(LowerThisThreadsPriority(50));
    EXPECT_EQ(ThisThreadsNice(), 19);
  });
  t.join();
}

}  // namespace
}  // namespace manypy
