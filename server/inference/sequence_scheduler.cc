#include "server/inference/sequence_scheduler.h"

#include <set>

#include "server/log.h"

namespace manypy {

StatusOr<SequenceScheduler::Params> SequenceScheduler::ParamsOf(const InferenceRequest& r,
                                                                const std::string& model) {
  Params p;
  const Value* id =
      r.parameters.kind() == Value::Kind::kDict ? r.parameters.Find("sequence_id") : nullptr;
  if (id != nullptr && id->kind() == Value::Kind::kInt) {
    // Unsigned: a gRPC uint64_param arrives as int64 bits.
    if (id->to_int() != 0) p.key = std::to_string(static_cast<uint64_t>(id->to_int()));
  } else if (id != nullptr && id->kind() == Value::Kind::kStr) {
    if (!id->to_str().empty()) p.key = "'" + id->to_str() + "'";
  } else if (id != nullptr) {
    return InvalidArgument("model '" + model +
                           "': parameter sequence_id must be a non-zero integer or a non-empty "
                           "string, got " +
                           id->DebugString());
  }
  for (auto [name, flag] :
       {std::pair{"sequence_start", &p.start}, std::pair{"sequence_end", &p.end}}) {
    const Value* v = r.parameters.kind() == Value::Kind::kDict ? r.parameters.Find(name) : nullptr;
    if (v == nullptr) continue;
    if (v->kind() != Value::Kind::kBool) {
      return InvalidArgument("model '" + model + "': parameter " + name +
                             " must be true or false, got " + v->DebugString());
    }
    *flag = v->to_bool();
  }
  return p;
}

std::string SequenceScheduler::Name(const std::string& key) const {
  return "sequence " + key + " of model '" + model_ + "'";
}

Status SequenceScheduler::Enqueue(RequestPtr* request) {
  StatusOr<Params> p = ParamsOf(**request, model_);
  if (!p.ok()) return p.status();
  if (p->key.empty()) {
    return InvalidArgument("model '" + model_ +
                           "' keeps stateful sequences: every request needs the parameter "
                           "sequence_id (a non-zero integer or a non-empty string), and a "
                           "sequence's first request sequence_start true");
  }
  auto it = active_.find(p->key);
  if (p->start) {
    if (it != active_.end()) {
      return InvalidArgument(Name(p->key) +
                             " is already active: end it (sequence_end) before starting it "
                             "again, or use another sequence_id");
    }
    if (active_.size() >= static_cast<size_t>(spec_.max_concurrent_sequences)) {
      return {StatusCode::kResourceExhausted,
              "model '" + model_ + "' has " + std::to_string(active_.size()) +
                  " active sequences, its limit (max_concurrent_sequences " +
                  std::to_string(spec_.max_concurrent_sequences) + "); end one, or retry later"};
    }
  } else if (it == active_.end()) {
    auto closed = closed_.find(p->key);
    if (closed != closed_.end() && closed->second.how == Closure::kEnded) {
      return InvalidArgument(Name(p->key) +
                             " has already ended (sequence_end); start it again with "
                             "sequence_start true");
    }
    if (closed != closed_.end()) {
      return InvalidArgument(
          Name(p->key) + " timed out: it had no request for " +
          FormatSeconds(std::chrono::microseconds(spec_.max_sequence_idle_microseconds)) +
          " s (max_sequence_idle_microseconds " +
          std::to_string(spec_.max_sequence_idle_microseconds) +
          ") and was ended; start it again with sequence_start true");
    }
    return InvalidArgument(Name(p->key) +
                           " was never started (or ended too long ago to be remembered): its "
                           "first request needs sequence_start true");
  } else {
    // Its end request queued already: nothing may follow it.
    for (const RequestPtr& queued : queue_) {
      StatusOr<Params> q = ParamsOf(*queued, model_);
      if (q.ok() && q->key == p->key && q->end) {
        return InvalidArgument(Name(p->key) +
                               " has already ended (its sequence_end request is "
                               "queued)");
      }
    }
  }
  Clock::time_point arrived = (*request)->times.prepared;
  MANYPY_RETURN_IF_ERROR(Scheduler::Enqueue(request));
  if (p->start) {
    closed_.erase(p->key);
    Sequence fresh;
    fresh.last = arrived;
    active_.emplace(p->key, fresh);
  } else {
    it->second.last = std::max(it->second.last, arrived);
  }
  return Status::Ok();
}

std::vector<RequestPtr> SequenceScheduler::Next(size_t slot, Clock::time_point, bool,
                                                Clock::time_point*) {
  std::vector<RequestPtr> one;
  if (running_.count(slot) > 0) return one;  // a nested call on this slot: never a sequence's
  std::set<std::string> seen;                // sequences with an older request queued
  for (auto q = queue_.begin(); q != queue_.end(); ++q) {
    StatusOr<Params> p = ParamsOf(**q, model_);
    if (!p.ok()) continue;                      // checked by Enqueue: cannot happen
    if (!seen.insert(p->key).second) continue;  // its sequence's requests run in order
    auto it = active_.find(p->key);
    if (it == active_.end()) continue;
    Sequence& s = it->second;
    if (s.running || (s.bound && s.slot != slot)) continue;
    s.bound = true;
    s.slot = slot;
    s.running = true;
    running_[slot] = {p->key, p->end};
    if (p->end) {
      // Closed as it starts: a request after it is refused as ended, and a
      // start of the same id may begin a new sequence.
      active_.erase(it);
      Remember(p->key, Closure::kEnded);
    }
    one.push_back(std::move(*q));
    queue_.erase(q);
    return one;
  }
  return one;
}

std::vector<std::string> SequenceScheduler::ExecutionEnded(size_t slot, Clock::time_point now) {
  auto r = running_.find(slot);
  if (r == running_.end()) return {};
  Running ran = std::move(r->second);
  running_.erase(r);
  if (ran.end) return {ran.key};
  auto it = active_.find(ran.key);
  if (it != active_.end()) {
    it->second.running = false;
    it->second.last = now;  // idle from here
  }
  return {};
}

void SequenceScheduler::CloseIdle(Clock::time_point now, std::vector<ClosedSequence>* closed,
                                  Clock::time_point* wake) {
  if (active_.empty()) return;
  std::set<std::string> queued;
  for (const RequestPtr& q : queue_) {
    StatusOr<Params> p = ParamsOf(*q, model_);
    if (p.ok()) queued.insert(p->key);
  }
  const std::chrono::microseconds limit(spec_.max_sequence_idle_microseconds);
  for (auto it = active_.begin(); it != active_.end();) {
    const Sequence& s = it->second;
    if (s.running || queued.count(it->first) > 0) {
      ++it;
      continue;
    }
    Clock::time_point due = s.last + limit;
    if (now < due) {
      if (due < *wake) *wake = due;
      ++it;
      continue;
    }
    closed->push_back({it->first, s.bound, s.slot,
                       std::chrono::duration_cast<std::chrono::microseconds>(now - s.last)});
    Remember(it->first, Closure::kTimedOut);
    it = active_.erase(it);
  }
}

void SequenceScheduler::Remember(const std::string& key, Closure how) {
  uint64_t serial = next_serial_++;
  closed_[key] = {how, serial};
  closed_order_.emplace_back(key, serial);
  while (closed_order_.size() > kRememberedClosed) {
    auto& [old, old_serial] = closed_order_.front();
    auto it = closed_.find(old);
    if (it != closed_.end() && it->second.serial == old_serial) closed_.erase(it);
    closed_order_.pop_front();
  }
}

}  // namespace manypy
