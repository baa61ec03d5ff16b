// ServerProcess: runs the real manypy-server binary on a free loopback port
// for end-to-end tests (with its supervisor, as by default, unless the test
// passes --no-supervisor), and stops it with SIGTERM. Not thread-safe.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

namespace manypy::testing {

class ServerProcess {
 public:
  /// Starts `binary` with `args` plus --grpc-address=127.0.0.1 --grpc-port=0
  /// --http-port=0 --metrics-port=0 and waits (up to `timeout_s`) for its "listening on" line.
  bool Start(const std::string& binary, std::vector<std::string> args, int timeout_s = 180) {
    return Spawn(binary, std::move(args)) && WaitForListening(timeout_s);
  }

  /// Starts it as Start does without waiting for anything.
  bool Spawn(const std::string& binary, std::vector<std::string> args) {
    args.insert(args.begin(), {binary, "--grpc-address=127.0.0.1", "--grpc-port=0", "--http-port=0",
                                 "--metrics-port=0"});
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      if (open_files_.rlim_max > 0) setrlimit(RLIMIT_NOFILE, &open_files_);
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      if (!stderr_path_.empty()) {
        int err = open(stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err >= 0) dup2(err, STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    stdout_fd_ = out[0];
    return pid_ > 0;
  }

  /// After Spawn: waits (up to `timeout_s`) for its "listening on" line.
  bool WaitForListening(int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::string text;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{stdout_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char buf[512];
      ssize_t n = read(stdout_fd_, buf, sizeof(buf));
      if (n <= 0) return false;  // exited before listening
      text.append(buf, n);
      // gRPC's line; not "HTTP listening on ..." nor "metrics listening on ...".
      // Any address (a test may listen on 0.0.0.0): the port is after its last ':'.
      size_t at = text.find("manypy-server: listening on ");
      size_t comma = at == std::string::npos ? std::string::npos : text.find(',', at);
      if (comma != std::string::npos) {
        port_ = std::stoi(text.substr(text.rfind(':', comma) + 1));
        // Printed before it, each when its endpoint is on.
        http_port_ = PortAfter(text, "HTTP listening on ");
        metrics_port_ = PortAfter(text, "metrics listening on http://");
        return true;
      }
    }
    return false;
  }

  /// Before Start: the server's stderr (its log) goes to this file instead of the test's.
  void set_stderr_path(std::string path) { stderr_path_ = std::move(path); }
  /// Before Start: the server runs with this RLIMIT_NOFILE (set between fork and exec).
  void set_open_file_limit(rlim_t soft, rlim_t hard) { open_files_ = {soft, hard}; }

  /// Waits (up to `timeout_s`) for the server to exit on its own; its exit status
  /// (128 + signal if killed by one), or -1 if it is still running.
  int WaitForExit(int timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (pid_ > 0 && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      poll(nullptr, 0, 50);
    }
    return -1;
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  /// The HTTP port from the "HTTP listening on ADDR:PORT" line (0: HTTP off).
  int http_port() const { return http_port_; }
  /// The metrics port from the "metrics listening on URL" line (0: metrics off).
  int metrics_port() const { return metrics_port_; }
  /// The process started: the supervisor, unless --no-supervisor was given.
  pid_t pid() const { return pid_; }
  /// The process that serves (loads the models, maps their files): the
  /// supervisor's child, or pid() itself without a supervisor.
  pid_t serving_pid() const {
    if (pid_ <= 0) return pid_;
    std::ifstream children("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) +
                           "/children");
    pid_t child = -1;
    return children >> child ? child : pid_;
  }

  /// Sends SIGTERM and returns the exit status (-1 if it did not exit normally).
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (stdout_fd_ >= 0) close(stdout_fd_);
    stdout_fd_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_fd_ >= 0) close(stdout_fd_);
  }

 private:
  // The port of the first "ADDR:PORT" after `label` in `text`; 0 if absent.
  static int PortAfter(const std::string& text, const std::string& label) {
    size_t at = text.find(label);
    if (at == std::string::npos) return 0;
    size_t colon = text.find(':', at + label.size());
    return colon == std::string::npos ? 0 : std::stoi(text.substr(colon + 1));
  }

  pid_t pid_ = -1;
  std::string stderr_path_;
  rlimit open_files_{0, 0};  // {0, 0}: the test's own
  int stdout_fd_ = -1;
  int port_ = 0;
  int http_port_ = 0;
  int metrics_port_ = 0;
};

}  // namespace manypy::testing
