// RunningCalls: which model (name, version) and request each dispatcher slot
// is running now, in a fixed table a crash handler can read without a lock or
// an allocation. Thread-safe: each slot is written only by the thread running
// on it (ScopedRunningCall), and read, racily but safely, by the crash handler.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace manypy {

struct RunningCall {
  static constexpr size_t kNameBytes = 128;
  static constexpr size_t kIdBytes = 96;
  /// Odd while the owning thread rewrites the entry (a seqlock's counter).
  std::atomic<uint32_t> generation{0};
  bool busy = false;
  int64_t version = 0;
  uint32_t requests = 0;  ///< in the batch; the id is the first one's
  char model[kNameBytes] = {};
  char request_id[kIdBytes] = {};
};

/// The table's size: slots above it are not recorded (no pool has that many interpreters).
constexpr size_t kMaxRunningCallSlots = 256;

/// The entry of `slot` (null above the table's size).
RunningCall* RunningCallAt(size_t slot);
/// The slot the calling thread runs a model call on now; -1 when none.
int CurrentRunningCallSlot();

/// Marks `slot` as running `model` `version` for `request_id` (and `requests`
/// requests in all) while it lives; restores what the slot ran before (a
/// nested call runs on its caller's slot) when it ends.
class ScopedRunningCall {
 public:
  ScopedRunningCall(size_t slot, const std::string& model, int64_t version,
                    const std::string& request_id, size_t requests);
  ~ScopedRunningCall();
  ScopedRunningCall(const ScopedRunningCall&) = delete;
  ScopedRunningCall& operator=(const ScopedRunningCall&) = delete;

 private:
  RunningCall* entry_;
  int previous_slot_;
  bool was_busy_ = false;
  int64_t was_version_ = 0;
  uint32_t was_requests_ = 0;
  char was_model_[RunningCall::kNameBytes] = {};
  char was_request_id_[RunningCall::kIdBytes] = {};
};

/// A model version being loaded (its archive unpickled, its warm-up run):
/// the load's thread and, when only one load runs, any thread's crash is
/// blamed on it. At most kMaxLoadingModels at once are recorded.
constexpr size_t kMaxLoadingModels = 16;
struct LoadingModel {
  std::atomic<bool> claimed{false};
  std::atomic<uint32_t> generation{0};  ///< odd while written
  int64_t version = 0;
  char model[RunningCall::kNameBytes] = {};
};
LoadingModel* LoadingModelAt(size_t index);
/// The entry of the load the calling thread runs; -1 when none.
int CurrentLoadingModel();

/// Records a load while it lives (nothing when the table is full).
class ScopedLoadingModel {
 public:
  ScopedLoadingModel(const std::string& model, int64_t version);
  ~ScopedLoadingModel();
  ScopedLoadingModel(const ScopedLoadingModel&) = delete;
  ScopedLoadingModel& operator=(const ScopedLoadingModel&) = delete;

 private:
  int index_ = -1;
  int previous_;
};

}  // namespace manypy
