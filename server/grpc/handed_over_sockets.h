// HandedOverSockets: the sockets this process gave to another owner (gRPC),
// known by inode, so it can count how many that owner still holds open.
// Not thread-safe: one thread adds and recounts.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <unordered_set>

namespace manypy {

class HandedOverSockets {
 public:
  /// Records the socket `fd` before it is handed over. An inode, not the fd
  /// number: once the owner closes the fd, the number is soon another socket's,
  /// while a socket's inode is not reused. False when `fd` cannot be read.
  bool Add(int fd);

  /// Forgets the sockets no longer open in this process (/proc/self/fd's
  /// `socket:[INODE]` links). False, forgetting nothing, when that directory
  /// cannot be read (e.g. no file descriptor is left to open it).
  bool Recount();

  /// Handed-over sockets open at the last Recount, plus those added since.
  size_t size() const { return inodes_.size(); }

 private:
  std::unordered_set<ino_t> inodes_;
};

}  // namespace manypy
