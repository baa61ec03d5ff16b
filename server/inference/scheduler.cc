#include "server/inference/scheduler.h"

namespace manypy {

Status Scheduler::Enqueue(RequestPtr* request) {
  if (queue_.size() >= max_queue_size_) {
    return {StatusCode::kResourceExhausted,
            "model '" + model_ + "' has " + std::to_string(queue_.size()) +
                " requests queued, its limit (max_queue_size " + std::to_string(max_queue_size_) +
                "); retry later"};
  }
  queue_.push_back(std::move(*request));
  return Status::Ok();
}

void Scheduler::Expire(Clock::time_point now, std::vector<RequestPtr>* expired,
                       Clock::time_point* wake) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    InferenceRequest& r = **it;
    if (r.deadline <= now || r.ClientLeft()) {
      expired->push_back(std::move(*it));
      it = queue_.erase(it);
      continue;
    }
    if (r.deadline < *wake) *wake = r.deadline;
    ++it;
  }
}

RequestPtr Scheduler::Take(const InferenceRequest* request) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (it->get() == request) {
      RequestPtr taken = std::move(*it);
      queue_.erase(it);
      return taken;
    }
  }
  return nullptr;
}

std::vector<RequestPtr> Scheduler::TakeAll() {
  std::vector<RequestPtr> all;
  for (auto& r : queue_) all.push_back(std::move(r));
  queue_.clear();
  return all;
}

std::vector<RequestPtr> FifoScheduler::Next(size_t, Clock::time_point, bool, Clock::time_point*) {
  std::vector<RequestPtr> one;
  if (queue_.empty()) return one;
  one.push_back(std::move(queue_.front()));
  queue_.pop_front();
  return one;
}

}  // namespace manypy
