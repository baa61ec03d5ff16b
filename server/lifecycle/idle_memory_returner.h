// IdleMemoryReturner: a thread that hands back to the kernel the memory the
// allocator has held free for a whole window (a refused oversized gRPC message,
// a burst's buffers) beyond what it keeps. Thread-safe: Start, then the destructor.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace manypy {

class IdleMemoryReturner {
 public:
  struct Options {
    /// How often the allocator's free bytes are read (a cheap property read).
    std::chrono::milliseconds interval{100};
    /// Memory free at every reading over this window is returned: memory a
    /// steady workload reuses dips within it and stays.
    std::chrono::milliseconds window{1000};
    /// Free bytes kept for the next requests.
    int64_t keep_bytes = int64_t{16} << 20;
  };

  static std::unique_ptr<IdleMemoryReturner> Start(Options options);
  ~IdleMemoryReturner();

  /// The bytes to return given the free bytes read over the last window
  /// (oldest first): what every reading had free, less `keep_bytes`. Pure.
  static int64_t ToReturn(const std::deque<int64_t>& readings, size_t window_readings,
                          int64_t keep_bytes);

  /// The readings as they would have been had `returned` bytes never been
  /// free: each less `returned`, at least 0. Keeping them (not starting a new
  /// window) lets memory freed in stages, as connections close one after
  /// another, come back a window after each stage. Pure.
  static void Forget(std::deque<int64_t>& readings, int64_t returned);

 private:
  explicit IdleMemoryReturner(Options options) : options_(options) {}
  void Run();

  const Options options_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace manypy
