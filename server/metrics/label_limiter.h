// LabelLimiter: keeps a label's value set bounded: the first `limit` distinct
// values pass through, later ones become "other". Thread-safe (a mutex).
#pragma once

#include <mutex>
#include <set>
#include <string>

#include "common/mutex.h"

namespace manypy {

class LabelLimiter {
 public:
  explicit LabelLimiter(size_t limit) : limit_(limit) {}

  std::string Bound(const std::string& value) {
    MutexLock lock(mu_);
    if (seen_.count(value) > 0) return value;
    if (seen_.size() >= limit_) return "other";
    seen_.insert(value);
    return value;
  }

 private:
  const size_t limit_;
  Mutex mu_;
  std::set<std::string> seen_ GUARDED_BY(mu_);
};

}  // namespace manypy
