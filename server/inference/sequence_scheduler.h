// SequenceScheduler: stateful sequences (Triton's sequence batcher, direct strategy),
// each bound to one interpreter slot, its requests run there one at a time in order.
// Not thread-safe: the Dispatcher calls every method under its lock.
#pragma once

#include <deque>
#include <map>
#include <string>
#include <unordered_map>

#include "package_format/manifest.h"
#include "server/inference/scheduler.h"

namespace manypy {

/// A request names its sequence with the parameters `sequence_id` (a
/// non-zero integer or a non-empty string), `sequence_start` and
/// `sequence_end` (bools, default false). Enqueue refuses, INVALID_ARGUMENT
/// naming the model and the id: a request without a sequence_id; one for a
/// sequence never started, already ended or timed out (the message says
/// which; the last kRememberedClosed closed ids are remembered); a start for
/// a sequence already active (refused, not restarted as Triton does: the
/// running one's state would be lost silently). RESOURCE_EXHAUSTED naming
/// the limit: a start beyond max_concurrent_sequences.
/// A sequence binds to the first slot whose worker asks for its start; from
/// then on only that slot runs it, never two of its requests at once. It is
/// closed by its end request (as that request starts: later ones are refused
/// as ended) or by CloseIdle once nothing of it is queued or running for
/// max_sequence_idle_microseconds.
class SequenceScheduler final : public Scheduler {
 public:
  static constexpr size_t kRememberedClosed = 4096;

  SequenceScheduler(std::string model, size_t max_queue_size, SequenceBatchingSpec spec)
      : Scheduler(std::move(model), max_queue_size), spec_(spec) {}

  Status Enqueue(RequestPtr* request) override;
  std::vector<RequestPtr> Next(size_t slot, Clock::time_point now, bool model_idle,
                               Clock::time_point* wake) override;
  std::vector<std::string> ExecutionEnded(size_t slot, Clock::time_point now) override;
  void CloseIdle(Clock::time_point now, std::vector<ClosedSequence>* closed,
                 Clock::time_point* wake) override;
  bool pins_slots() const override { return true; }

  size_t active() const { return active_.size(); }

  /// What a request's parameters say of its sequence.
  struct Params {
    std::string key;  ///< "42", or "'abc'" for a string id; empty: no sequence_id
    bool start = false;
    bool end = false;
  };
  /// INVALID_ARGUMENT naming `model` for a parameter of the wrong type.
  static StatusOr<Params> ParamsOf(const InferenceRequest& request, const std::string& model);

 private:
  struct Sequence {
    bool bound = false;
    size_t slot = 0;
    bool running = false;
    Clock::time_point last;  // its latest request arrived or ended
  };
  struct Running {
    std::string key;
    bool end = false;
  };
  enum class Closure { kEnded, kTimedOut };

  void Remember(const std::string& key, Closure how);  // a closed sequence
  std::string Name(const std::string& key) const;      // "sequence 42 of model 'm'"

  const SequenceBatchingSpec spec_;
  std::unordered_map<std::string, Sequence> active_;
  std::map<size_t, Running> running_;  // slot -> the request running there
  struct Closed {
    Closure how;
    uint64_t serial;  // which entry of closed_order_ is this closure's
  };
  std::unordered_map<std::string, Closed> closed_;
  // Oldest first, at most kRememberedClosed; an id closed again has a newer entry.
  std::deque<std::pair<std::string, uint64_t>> closed_order_;
  uint64_t next_serial_ = 0;
};

}  // namespace manypy
