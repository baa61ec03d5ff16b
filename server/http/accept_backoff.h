// AcceptBackoff: how long an accept loop waits after accept() fails for want of
// descriptors or memory (it would fail again at once), and when it says so.
// A plain value; not thread-safe (one accept loop owns one).
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>

namespace manypy {

class AcceptBackoff {
 public:
  static constexpr std::chrono::milliseconds kFirstWait{10};
  static constexpr std::chrono::milliseconds kLongestWait{1000};

  /// Whether accept()'s `error` (an errno value) is one that waiting cures:
  /// EMFILE, ENFILE, ENOBUFS, ENOMEM. Others (a client gone while queued) are
  /// retried at once.
  static bool Transient(int error) {
    return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
  }

  /// After a transient failure: how long to wait before the next accept
  /// (10 ms, doubling to 1 s). `*first` says whether it begins an episode, the
  /// one time to log.
  std::chrono::milliseconds Failed(bool* first) {
    *first = failures_ == 0;
    ++failures_;
    const auto wait = wait_;
    wait_ = std::min(wait_ * 2, kLongestWait);
    return wait;
  }

  /// After an accept succeeds: the failures of the episode it ends (0: none).
  int64_t Succeeded() {
    const int64_t ended = failures_;
    failures_ = 0;
    wait_ = kFirstWait;
    return ended;
  }

 private:
  int64_t failures_ = 0;
  std::chrono::milliseconds wait_ = kFirstWait;
};

}  // namespace manypy
