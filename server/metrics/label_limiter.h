// LabelLimiter: keeps a label's value set bounded: the first `limit` distinct
// values pass through, later ones become "other". Thread-safe (a mutex).
#pragma once

#include <mutex>
#include <set>
#include <string>

namespace manypy {

class LabelLimiter {
 public:
  explicit LabelLimiter(size_t limit) : limit_(limit) {}

  std::string Bound(const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    if (seen_.count(value) > 0) return value;
    if (seen_.size() >= limit_) return "other";
    seen_.insert(value);
    return value;
  }

 private:
  const size_t limit_;
  std::mutex mu_;
  std::set<std::string> seen_;  // guarded by mu_
};

}  // namespace manypy
