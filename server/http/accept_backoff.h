// AcceptBackoff: how long an accept loop waits after accept() fails for want of
// descriptors or memory (it would fail again at once), and when it says so.
// A plain value; not thread-safe (one accept loop owns one).
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <optional>

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

  /// An episode that begins within this of the start of the last one said is
  /// not said: with descriptors at the edge (one freed, taken by an accept,
  /// freed again) each accepted connection would otherwise log two lines.
  static constexpr std::chrono::seconds kQuietAfterSaying{60};

  struct Wait {
    std::chrono::milliseconds wait;  ///< before the next accept: 10 ms, doubling to 1 s
    bool say;  ///< it begins an episode, and none was said within kQuietAfterSaying
  };

  /// After a transient failure at `now` (a steady clock's).
  Wait Failed(std::chrono::steady_clock::time_point now) {
    bool say = false;
    if (failures_ == 0) {
      say = !last_said_ || now - *last_said_ >= kQuietAfterSaying;
      episode_said_ = say;
      if (say) last_said_ = now;
    }
    ++failures_;
    const auto wait = wait_;
    wait_ = std::min(wait_ * 2, kLongestWait);
    return {wait, say};
  }

  /// After an accept succeeds: the failures of the episode it ends, when that
  /// episode was said (0: no episode, or one not said).
  int64_t Succeeded() {
    const int64_t ended = episode_said_ ? failures_ : 0;
    failures_ = 0;
    episode_said_ = false;
    wait_ = kFirstWait;
    return ended;
  }

  /// When the last episode said began (the `now` of its first failure): the
  /// start of the one Succeeded last reported ending.
  std::chrono::steady_clock::time_point LastSaid() const {
    return last_said_.value_or(std::chrono::steady_clock::time_point());
  }

 private:
  int64_t failures_ = 0;
  std::chrono::milliseconds wait_ = kFirstWait;
  bool episode_said_ = false;
  std::optional<std::chrono::steady_clock::time_point> last_said_;  // none said yet
};

}  // namespace manypy
