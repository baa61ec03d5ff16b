// ServableModel: one loaded version of a model plus its inference statistics.
// Shared by in-flight requests through shared_ptr (the last one out unloads
// it). Thread-safe: the model is immutable, statistics are atomic counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "server/packaged_model.h"

namespace manypy {

/// Cumulative counters in the shape of the protocol's InferStatistics.
struct InferenceStats {
  std::atomic<uint64_t> inference_count{0};  // inferences (batch items) run
  std::atomic<uint64_t> execution_count{0};  // model calls
  std::atomic<uint64_t> success_count{0}, success_ns{0};
  std::atomic<uint64_t> fail_count{0}, fail_ns{0};
  std::atomic<uint64_t> queue_ns{0};
  std::atomic<uint64_t> compute_input_ns{0}, compute_infer_ns{0}, compute_output_ns{0};
  std::atomic<uint64_t> last_inference_ms{0};  // since the epoch
};

class ServableModel {
 public:
  ServableModel(std::string path, std::unique_ptr<PackagedModel> model)
      : path_(std::move(path)), model_(std::move(model)) {}

  const Manifest& manifest() const { return model_->manifest(); }
  const std::string& name() const { return manifest().name; }
  int64_t version() const { return manifest().version; }
  const std::string& path() const { return path_; }
  const PackagedModel& model() const { return *model_; }
  InferenceStats& stats() const { return stats_; }

 private:
  const std::string path_;
  const std::unique_ptr<PackagedModel> model_;
  mutable InferenceStats stats_;
};

}  // namespace manypy
