// StreamWindow: room for a bounded number of unwritten responses, and each
// way a wait for room ends (room, the client leaving, a closed stream, a
// stalled reader, the client's deadline).
#include "server/core/stream_window.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace manypy {
namespace {

using namespace std::chrono_literals;
const auto kNoDeadline = Clock::time_point::max();

TEST(StreamWindowTest, TakesRoomUpToItsCapacityAndWaitsForARelease) {
  StreamWindow window(2);
  EXPECT_TRUE(window.Acquire("m", 0us, kNoDeadline, {}).ok());
  EXPECT_TRUE(window.Acquire("m", 0us, kNoDeadline, {}).ok());
  EXPECT_EQ(window.unwritten(), 2u);
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    window.Release();
  });
  auto start = Clock::now();
  EXPECT_TRUE(window.Acquire("m", 0us, kNoDeadline, {}).ok());
  EXPECT_GE(Clock::now() - start, 40ms);
  writer.join();
  EXPECT_EQ(window.unwritten(), 2u);
}

TEST(StreamWindowTest, AStalledReaderEndsTheWaitAtTheLimitNamingTheModel) {
  StreamWindow window(1);
  ASSERT_TRUE(window.Acquire("m", 0us, kNoDeadline, {}).ok());
  auto start = Clock::now();
  Status s = window.Acquire("lm", 100ms, kNoDeadline, {});
  EXPECT_GE(Clock::now() - start, 90ms);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("the client read none of the 1 responses waiting in the stream of "
                             "model 'lm' for 0.1 s"),
            std::string::npos)
      << s.message();
}

TEST(StreamWindowTest, TheClientsDeadlineEndsTheWait) {
  StreamWindow window(1);
  ASSERT_TRUE(window.Acquire("m", 0us, kNoDeadline, {}).ok());
  Status s = window.Acquire("m", 10s, Clock::now() + 30ms, {});
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("deadline"), std::string::npos) << s.message();
}

TEST(StreamWindowTest, AClientThatLeavesOrAClosedStreamEndsTheWaitCancelled) {
  StreamWindow window(1);
  ASSERT_TRUE(window.Acquire("m", 0us, kNoDeadline, {}).ok());
  std::atomic<bool> left{false};
  std::thread client([&] {
    std::this_thread::sleep_for(30ms);
    left = true;
  });
  auto start = Clock::now();
  Status s = window.Acquire("m", 0us, kNoDeadline, [&] { return left.load(); });
  client.join();
  EXPECT_EQ(s.code(), StatusCode::kCancelled);
  EXPECT_LT(Clock::now() - start, 1s);  // noticed within its 10 ms checks, not at a limit

  std::thread closer([&] {
    std::this_thread::sleep_for(30ms);
    window.Close();
  });
  EXPECT_EQ(window.Acquire("m", 0us, kNoDeadline, {}).code(), StatusCode::kCancelled);
  closer.join();
  window.Release();  // even with room, a closed stream takes nothing more
  EXPECT_EQ(window.Acquire("m", 0us, kNoDeadline, {}).code(), StatusCode::kCancelled);
}

}  // namespace
}  // namespace manypy
