// HandedOverSockets: counts by inode, so a closed socket whose fd number is
// reused at once is still seen as closed.
#include "server/grpc/handed_over_sockets.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace manypy {
namespace {

TEST(HandedOverSocketsTest, RecountForgetsClosedSocketsThoughTheirFdNumberIsReused) {
  HandedOverSockets sockets;
  int first = socket(AF_INET, SOCK_STREAM, 0), second = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  ASSERT_TRUE(sockets.Add(first));
  ASSERT_TRUE(sockets.Add(second));
  EXPECT_EQ(sockets.size(), 2u);
  ASSERT_TRUE(sockets.Recount());
  EXPECT_EQ(sockets.size(), 2u);  // both open

  close(first);
  int reuser = socket(AF_INET, SOCK_STREAM, 0);  // the lowest free number: first's
  ASSERT_EQ(reuser, first);
  ASSERT_TRUE(sockets.Recount());
  EXPECT_EQ(sockets.size(), 1u);  // the new socket on that number is another one

  close(second);
  close(reuser);
  ASSERT_TRUE(sockets.Recount());
  EXPECT_EQ(sockets.size(), 0u);
}

TEST(HandedOverSocketsTest, OnlySocketsAreAdded) {
  HandedOverSockets sockets;
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_FALSE(sockets.Add(pipe_fds[0]));
  EXPECT_FALSE(sockets.Add(-1));
  EXPECT_EQ(sockets.size(), 0u);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

}  // namespace
}  // namespace manypy
