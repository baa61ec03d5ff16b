// InferenceStats: cumulative counters of one model version in the shape of
// the protocol's InferStatistics. Thread-safe (atomic counters).
#pragma once

#include <atomic>
#include <cstdint>

namespace manypy {

struct InferenceStats {
  std::atomic<uint64_t> inference_count{0};  // inferences (batch rows) run
  std::atomic<uint64_t> execution_count{0};  // model calls
  std::atomic<uint64_t> success_count{0}, success_ns{0};
  std::atomic<uint64_t> fail_count{0}, fail_ns{0};
  std::atomic<uint64_t> queue_count{0}, queue_ns{0};
  std::atomic<uint64_t> compute_input_ns{0}, compute_infer_ns{0}, compute_output_ns{0};
  std::atomic<uint64_t> last_inference_ms{0};  // since the epoch
};

}  // namespace manypy
