#include "interpreters/file_cache.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "common/mutex.h"

extern char** environ;

namespace manypy {
namespace {

constexpr uint64_t kMul = 0x9E3779B97F4A7C15ULL;

uint64_t Mix(uint64_t h, uint64_t word) {
  h ^= word * kMul;
  h = (h << 27 | h >> 37) * 0xC2B2AE3D27D4EB4FULL;
  return h;
}

uint64_t HashBytes(uint64_t h, const unsigned char* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    h = Mix(h, w);
  }
  uint64_t tail = 0;
  memcpy(&tail, p + i, n - i);
  return Mix(Mix(h, tail), n);
}

std::string ErrnoText() { return strerror(errno); }

}  // namespace

StatusOr<uint64_t> HashFileContent(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return NotFound("cannot stat " + path + ": " + ErrnoText());
  using Key = std::tuple<std::string, ino_t, off_t, int64_t, int64_t>;
  static Mutex mu;
  static std::map<Key, uint64_t> memo GUARDED_BY(mu);
  Key key{path, st.st_ino, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
  {
    MutexLock lock(mu);
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
  }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("cannot open " + path + ": " + ErrnoText());
  uint64_t h = kMul;
  if (st.st_size > 0) {
    void* p = mmap(nullptr, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      return Internal("cannot map " + path + ": " + ErrnoText());
    }
    h = HashBytes(h, static_cast<const unsigned char*>(p), st.st_size);
    munmap(p, st.st_size);
  }
  close(fd);
  MutexLock lock(mu);
  memo[key] = h;
  return h;
}

uint64_t HashCombine(uint64_t seed, const std::string& text) {
  return HashBytes(Mix(seed, kMul), reinterpret_cast<const unsigned char*>(text.data()),
                   text.size());
}

std::string HexDigest(uint64_t value) {
  char buf[17];
  snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(value));
  return buf;
}

Status EnsureWritableDirectory(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("the cache directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return FailedPrecondition("cannot create cache directory " + dir + ": " + ec.message());
  if (!std::filesystem::is_directory(dir, ec)) {
    return FailedPrecondition("cache directory " + dir + " is not a directory");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return FailedPrecondition("cache directory " + dir + " is not writable: " + ErrnoText());
  }
  return Status::Ok();
}

Status MaterializeAtomically(const std::string& final_path,
                             const std::function<Status(const std::string&)>& make) {
  if (access(final_path.c_str(), F_OK) == 0) return Status::Ok();
  static std::atomic<uint64_t> counter{0};
  std::string tmp = final_path + ".tmp." + std::to_string(getpid()) + "." +
                    std::to_string(syscall(SYS_gettid)) + "." + std::to_string(counter++);
  Status status = make(tmp);
  if (status.ok()) {
    int fd = open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      fsync(fd);  // the rename must never publish a file whose data is not on disk
      close(fd);
    }
    if (rename(tmp.c_str(), final_path.c_str()) != 0) {
      status = Internal("cannot rename " + tmp + " to " + final_path + ": " + ErrnoText());
    }
  }
  if (!status.ok()) unlink(tmp.c_str());
  return status;
}

Status CopyFile(const std::string& from, const std::string& to) {
  std::error_code ec;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return Internal("cannot copy " + from + " to " + to + ": " + ec.message());
  return Status::Ok();
}

Status RunProgram(const std::string& program, const std::vector<std::string>& args) {
  std::vector<std::string> all{program};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  std::string command_line;
  for (auto& a : all) {
    argv.push_back(a.data());
    command_line += (command_line.empty() ? "" : " ") + a;
  }
  argv.push_back(nullptr);

  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return Internal("pipe: " + ErrnoText());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDERR_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  pid_t pid;
  int rc = posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipefd[1]);
  if (rc != 0) {
    close(pipefd[0]);
    return FailedPrecondition("cannot run " + program + " (is it installed?): " + strerror(rc));
  }
  std::string output;
  char buf[4096];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0 && output.size() < 16384) output.append(buf, n);
  }
  close(pipefd[0]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Internal("command failed: " + command_line + ": " + output);
  }
  return Status::Ok();
}

}  // namespace manypy
