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
  AcceptBackoff backoff;
  EXPECT_EQ(backoff.Succeeded(), 0);  // no episode
  std::vector<int64_t> waits;
  int firsts = 0;
  for (int i = 0; i < 10; ++i) {
    bool first = false;
    waits.push_back(backoff.Failed(&first).count());
    firsts += first;
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{10, 20, 40, 80, 160, 320, 640, 1000, 1000, 1000}));
  EXPECT_EQ(firsts, 1);
  EXPECT_EQ(backoff.Succeeded(), 10);
  bool first = false;
  EXPECT_EQ(backoff.Failed(&first), milliseconds(10));  // a new episode starts over
  EXPECT_TRUE(first);
  EXPECT_TRUE(AcceptBackoff::Transient(EMFILE));
  EXPECT_TRUE(AcceptBackoff::Transient(ENFILE));
  EXPECT_TRUE(AcceptBackoff::Transient(ENOBUFS));
  EXPECT_TRUE(AcceptBackoff::Transient(ENOMEM));
  EXPECT_FALSE(AcceptBackoff::Transient(ECONNABORTED));
}

}  // namespace
}  // namespace manypy
