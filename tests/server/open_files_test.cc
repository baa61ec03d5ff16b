// The open-file limit raised at start, the connection limits fitted under it
// (open_files.h), and the HTTP accept loop's back-off (accept_backoff.h).
#include "server/open_files.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/http/accept_backoff.h"

namespace manypy {
namespace {

using std::chrono::milliseconds;

TEST(FitConnectionLimitsTest, LimitsThatFitAreKept) {
  ConnectionLimits fitted = FitConnectionLimits(1 << 20, 100, 1024, 1024);
  EXPECT_EQ(fitted.http, 1024);
  EXPECT_EQ(fitted.grpc, 1024);
  EXPECT_FALSE(fitted.clamped);
  EXPECT_EQ(fitted.available, (1 << 20) - 100 - kReservedDescriptors);
  EXPECT_FALSE(FitConnectionLimits(-1, 100, 1024, 1024).clamped);  // unlimited
}

TEST(FitConnectionLimitsTest, LimitsOverTheDescriptorsShrinkInProportion) {
  // 1024 descriptors, 100 open, 64 kept: 860 for connections.
  ConnectionLimits fitted = FitConnectionLimits(1024, 100, 1024, 1024);
  EXPECT_TRUE(fitted.clamped);
  EXPECT_EQ(fitted.available, 860);
  EXPECT_EQ(fitted.http, 430);
  EXPECT_EQ(fitted.grpc, 430);
  fitted = FitConnectionLimits(1024, 100, 3000, 1000);
  EXPECT_EQ(fitted.http, 645);
  EXPECT_EQ(fitted.grpc, 215);
  EXPECT_LE(fitted.http + fitted.grpc, fitted.available);
  // HTTP off: gRPC has them all.
  fitted = FitConnectionLimits(1024, 100, 0, 1024);
  EXPECT_EQ(fitted.http, 0);
  EXPECT_EQ(fitted.grpc, 860);
  // None left: one each, never zero.
  fitted = FitConnectionLimits(128, 100, 1024, 1024);
  EXPECT_EQ(fitted.available, 0);
  EXPECT_EQ(fitted.http, 1);
  EXPECT_EQ(fitted.grpc, 1);
}

TEST(FitConnectionLimitsTest, TheLineNamesTheLimitAndBothFlags) {
  OpenFileLimit limit{1024, 4096, 4096, ""};
  std::string line =
      DescribeDescriptors(limit, 100, FitConnectionLimits(4096, 100, 1024, 1024), 1024, 1024);
  EXPECT_EQ(
      line,
      "descriptors: open-file limit 4096 (raised from 1024), hard limit 4096; 100 open, 64 kept "
      "for the server's own files; connection limits: HTTP 1024 (--http-max-connections=1024), "
      "gRPC 1024 (--grpc-max-connections=1024)");
  line = DescribeDescriptors({256, 256, 256, ""}, 50, FitConnectionLimits(256, 50, 1024, 1024),
                             1024, 1024);
  EXPECT_NE(
      line.find("HTTP 71 (--http-max-connections=1024, lowered to fit), gRPC 71 "
                "(--grpc-max-connections=1024, lowered to fit); raise the hard open-file limit"),
      std::string::npos)
      << line;
}

TEST(RaiseOpenFileLimitTest, TheSoftLimitRisesToTheHardOne) {
  // In a child, whose limits this process keeps apart from its own.
  pid_t child = fork();
  if (child == 0) {
    rlimit low{64, 200};
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(10);
    OpenFileLimit raised = RaiseOpenFileLimit();
    rlimit now{};
    getrlimit(RLIMIT_NOFILE, &now);
    _exit(raised.soft_before == 64 && raised.soft == 200 && raised.hard == 200 &&
                  raised.error.empty() && now.rlim_cur == 200 && OpenDescriptors() >= 3
              ? 0
              : 11);
  }
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(AcceptBackoffTest, WaitsDoubleToOneSecondAndAnEpisodeIsSaidOnce) {
  const auto t0 = std::chrono::steady_clock::now();
  AcceptBackoff backoff;
  EXPECT_EQ(backoff.Succeeded(), 0);  // no episode
  std::vector<int64_t> waits;
  int said = 0;
  for (int i = 0; i < 10; ++i) {
    const AcceptBackoff::Wait wait = backoff.Failed(t0 + milliseconds(i));
    waits.push_back(wait.wait.count());
    said += wait.say;
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000}));
  EXPECT_EQ(said, 1);
  EXPECT_EQ(backoff.Succeeded(), 10);
  // A new episode a minute after the last said starts over and is said.
  const AcceptBackoff::Wait next = backoff.Failed(t0 + AcceptBackoff::kQuietAfterSaying);
  EXPECT_EQ(next.wait, milliseconds(10));
  EXPECT_TRUE(next.say);
  EXPECT_TRUE(AcceptBackoff::Transient(EMFILE));
  EXPECT_TRUE(AcceptBackoff::Transient(ENFILE));
  EXPECT_TRUE(AcceptBackoff::Transient(ENOBUFS));
  EXPECT_TRUE(AcceptBackoff::Transient(ENOMEM));
  EXPECT_FALSE(AcceptBackoff::Transient(ECONNABORTED));
}

TEST(AcceptBackoffTest, EpisodesAtTheEdgeWithinAMinuteOfTheLastSaidAreNotSaid) {
  // Descriptors at the edge: each accept takes the one freed, the next fails.
  const auto t0 = std::chrono::steady_clock::now();
  AcceptBackoff backoff;
  EXPECT_TRUE(backoff.Failed(t0).say);
  EXPECT_EQ(backoff.LastSaid(), t0);
  EXPECT_EQ(backoff.Succeeded(), 1);
  int said = 0, ends_said = 0;
  for (int i = 1; i <= 20; ++i) {
    const AcceptBackoff::Wait wait = backoff.Failed(t0 + milliseconds(100 * i));
    EXPECT_EQ(wait.wait, milliseconds(10));  // each episode still starts at 10 ms
    said += wait.say;
    ends_said += backoff.Succeeded() != 0;
  }
  EXPECT_EQ(said, 0);
  EXPECT_EQ(ends_said, 0);
  EXPECT_EQ(backoff.LastSaid(), t0);  // the quiet episodes moved nothing
  // Past the minute, the next episode is said again.
  EXPECT_TRUE(backoff.Failed(t0 + AcceptBackoff::kQuietAfterSaying + milliseconds(1)).say);
  EXPECT_EQ(backoff.Succeeded(), 1);
}

}  // namespace
}  // namespace manypy
