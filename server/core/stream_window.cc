#include "server/core/stream_window.h"

#include <algorithm>
#include <cstdio>

#include "server/log.h"

namespace manypy {
namespace {

// How often a waiting Acquire looks whether the client left: frontends learn
// of a client leaving without telling anyone (gRPC's IsCancelled, HTTP's
// disconnect watch), so the wait asks; the issue allows 0.1 s to notice.
constexpr auto kClientCheck = std::chrono::milliseconds(10);

}  // namespace

Status StreamWindow::Acquire(const std::string& model, std::chrono::microseconds stall_limit,
                             Clock::time_point deadline, const std::function<bool()>& client_left) {
  const Clock::time_point start = Clock::now();
  const Clock::time_point stalled =
      stall_limit.count() > 0 ? start + stall_limit : Clock::time_point::max();
  MutexLock lock(mu_);
  for (;;) {
    if (closed_ || (client_left && client_left())) {
      return Cancelled("the client left the stream of model '" + model + "'");
    }
    if (unwritten_ < capacity_) {
      ++unwritten_;
      return Status::Ok();
    }
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      return DeadlineExceeded("the deadline of the request to model '" + model +
                              "' passed while its stream waited for the client to read");
    }
    if (now >= stalled) {
      return DeadlineExceeded("the client read none of the " + std::to_string(capacity_) +
                              " responses waiting in the stream of model '" + model + "' for " +
                              FormatSeconds(stall_limit) +
                              " s (the model's execution limit); the stream was ended");
    }
    room_.wait_until(lock.native(), std::min({now + kClientCheck, deadline, stalled}));
  }
}

void StreamWindow::Release() {
  {
    MutexLock lock(mu_);
    if (unwritten_ > 0) --unwritten_;
  }
  room_.notify_all();
}

void StreamWindow::Close() {
  {
    MutexLock lock(mu_);
    closed_ = true;
  }
  room_.notify_all();
}

size_t StreamWindow::unwritten() const {
  MutexLock lock(mu_);
  return unwritten_;
}

}  // namespace manypy
