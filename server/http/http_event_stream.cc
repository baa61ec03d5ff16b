#include "server/http/http_event_stream.h"

#include <utility>

namespace manypy {

void HttpEventStream::Push(Event event) {
  std::function<void()> wake;
  bool dropped = false;
  {
    MutexLock lock(mu_);
    dropped = abandoned_;
    if (!dropped) {
      events_.push_back(std::move(event));
      wake = std::exchange(wake_, nullptr);
    }
  }
  if (dropped && event.written) event.written();  // nobody will write it
  if (wake) wake();
}

void HttpEventStream::End() {
  std::function<void()> wake;
  {
    MutexLock lock(mu_);
    ended_ = true;
    wake = std::exchange(wake_, nullptr);
  }
  if (wake) wake();
}

bool HttpEventStream::Next(Event* event, bool* ended, std::function<void()> wake) {
  MutexLock lock(mu_);
  if (!events_.empty()) {
    *event = std::move(events_.front());
    events_.pop_front();
    *ended = false;
    return true;
  }
  *ended = ended_;
  if (!ended_) wake_ = std::move(wake);
  return false;
}

void HttpEventStream::Abandon() {
  std::deque<Event> dropped;
  {
    MutexLock lock(mu_);
    abandoned_ = true;
    dropped.swap(events_);
    wake_ = nullptr;
  }
  for (auto& e : dropped) {
    if (e.written) e.written();
  }
}

}  // namespace manypy
