#include "server/lifecycle/model_leases.h"

namespace manypy {

void LeaseEvents::WaitAfter(uint64_t seen, Clock::time_point deadline) {
  MutexLock lock(mu_);
  ++waiting_;
  cv_.wait_until(lock.native(), deadline, [&] { return events_.load() != seen; });
  --waiting_;
}

void LeaseEvents::Notify() {
  events_.fetch_add(1);
  // A waiter counts itself before it reads events_ under mu_: either it sees
  // this event, or this sees it waiting and wakes it.
  if (waiting_.load() == 0) return;
  MutexLock lock(mu_);
  cv_.notify_all();
}

std::shared_ptr<void> VersionLeases::Take() {
  out_.fetch_add(1);
  // Holds the leases it counts in: a request may outlive its model's handle.
  auto self = shared_from_this();
  return std::shared_ptr<void>(nullptr, [self](void*) { self->Return(); });
}

void VersionLeases::Return() {
  if (out_.fetch_sub(1) == 1) events_->Notify();
}

}  // namespace manypy
