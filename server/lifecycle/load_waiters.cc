#include "server/lifecycle/load_waiters.h"

#include <algorithm>

namespace manypy {
namespace {

// How often the watchdog asks waiters' clients whether they left: the
// dispatcher's watchdog looks as often at queued requests.
constexpr auto kCancelPoll = std::chrono::milliseconds(100);

std::string WaitedMs(Clock::time_point since) {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count());
}

}  // namespace

LoadWaiters::LoadWaiters() : watchdog_([this] { Watch(); }) {}

LoadWaiters::~LoadWaiters() {
  std::map<std::string, Flight> left;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    left.swap(flights_);
    cv_.notify_all();
  }
  watchdog_.join();
  for (auto& [name, flight] : left) {
    for (auto& w : flight.waiters) {
      w.done(Unavailable("the server is shutting down: model '" + name + "' was still loading"));
    }
  }
}

bool LoadWaiters::Add(const std::string& name, Waiter waiter) {
  MutexLock lock(mu_);
  auto [it, first] = flights_.try_emplace(name);
  if (first) it->second.started = Clock::now();
  it->second.waiters.push_back(std::move(waiter));
  cv_.notify_all();  // a nearer deadline, or a client to watch
  return first;
}

void LoadWaiters::Finish(const std::string& name, const Status& status) {
  std::vector<Waiter> answered;
  {
    MutexLock lock(mu_);
    auto it = flights_.find(name);
    if (it == flights_.end()) return;
    answered = std::move(it->second.waiters);
    flights_.erase(it);
  }
  for (auto& w : answered) w.done(status);
}

bool LoadWaiters::Loading(const std::string& name) const {
  MutexLock lock(mu_);
  return flights_.count(name) > 0;
}

void LoadWaiters::Watch() {
  MutexLock lock(mu_);
  while (!stopping_) {
    Clock::time_point now = Clock::now();
    Clock::time_point wake = Clock::time_point::max();
    std::vector<std::pair<Waiter, Status>> ended;
    for (auto& [name, flight] : flights_) {
      auto& ws = flight.waiters;
      for (auto w = ws.begin(); w != ws.end();) {
        if (w->deadline <= now) {
          ended.emplace_back(std::move(*w), DeadlineExceeded(
              "model '" + name + "' was still loading on demand at the request's deadline "
              "(waited " + WaitedMs(flight.started) + " ms since the load started)"));
        } else if (w->cancelled && w->cancelled()) {
          ended.emplace_back(std::move(*w), Cancelled("the client left while model '" + name +
                                                      "' was loading on demand"));
        } else {
          wake = std::min(wake, w->deadline);
          if (w->cancelled) wake = std::min(wake, now + kCancelPoll);
          ++w;
          continue;
        }
        w = ws.erase(w);
      }
    }
    if (!ended.empty()) {
      lock.Unlock();  // callbacks answer requests: never under mu_
      for (auto& [w, status] : ended) w.done(status);
      lock.Lock();
      continue;
    }
    if (wake == Clock::time_point::max()) {
      cv_.wait(lock.native());
    } else {
      cv_.wait_until(lock.native(), wake);
    }
  }
}

}  // namespace manypy
