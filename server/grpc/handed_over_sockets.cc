#include "server/grpc/handed_over_sockets.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace manypy {
namespace {

// The inode of a /proc/self/fd link's target "socket:[12345]"; 0 for any other file.
ino_t SocketInode(const char* target) {
  constexpr const char kPrefix[] = "socket:[";
  if (strncmp(target, kPrefix, sizeof(kPrefix) - 1) != 0) return 0;
  char* end = nullptr;
  unsigned long long inode = strtoull(target + sizeof(kPrefix) - 1, &end, 10);
  return end != nullptr && *end == ']' ? static_cast<ino_t>(inode) : 0;
}

}  // namespace

bool HandedOverSockets::Add(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  inodes_.insert(st.st_ino);
  return true;
}

bool HandedOverSockets::Recount() {
  if (inodes_.empty()) return true;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return false;
  std::unordered_set<ino_t> still_open;
  still_open.reserve(inodes_.size());
  // A socket another thread opens or closes while this reads is seen or not:
  // either is right for that moment, since only handed-over inodes are kept.
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    char target[64];
    ssize_t n = readlinkat(dirfd(dir), entry->d_name, target, sizeof(target) - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    ino_t inode = SocketInode(target);
    if (inode != 0 && inodes_.count(inode) > 0) still_open.insert(inode);
  }
  closedir(dir);
  inodes_.swap(still_open);
  return true;
}

}  // namespace manypy
