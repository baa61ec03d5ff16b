#include "server/inference/batching_scheduler.h"

#include <algorithm>

namespace manypy {

std::vector<RequestPtr> BatchingScheduler::Next(size_t, Clock::time_point now, bool model_idle,
                                                Clock::time_point* wake) {
  std::vector<RequestPtr> batch;
  if (queue_.empty()) return batch;
  const InferenceRequest& head = *queue_.front();

  // The compatible requests that fit, in arrival order.
  std::vector<size_t> picked;
  std::vector<int64_t> rows_after;  // rows_after[i]: rows of picked[0..i]
  int64_t rows = 0;
  bool full = false;
  for (size_t i = 0; i < queue_.size() && !full; ++i) {
    const InferenceRequest& r = *queue_[i];
    if (r.item_shapes != head.item_shapes) continue;
    if (rows + r.batch_rows > max_batch_size_) {
      full = true;
      break;
    }
    rows += r.batch_rows;
    picked.push_back(i);
    rows_after.push_back(rows);
    full = rows == max_batch_size_;
  }

  size_t take = 0;  // how many of `picked`
  if (full || model_idle) {
    take = picked.size();
  } else {
    // The largest preferred size the picked requests add up to exactly.
    for (size_t i = picked.size(); i-- > 0 && take == 0;) {
      if (std::find(spec_.preferred_batch_sizes.begin(), spec_.preferred_batch_sizes.end(),
                    rows_after[i]) != spec_.preferred_batch_sizes.end()) {
        take = i + 1;
      }
    }
    Clock::time_point due =
        head.times.prepared + std::chrono::microseconds(spec_.max_queue_delay_microseconds);
    if (take == 0 && now >= due) take = picked.size();
    if (take == 0 && due < *wake) *wake = due;
  }
  if (take == 0) return batch;

  // Move the taken requests out, keeping the others in order.
  std::deque<RequestPtr> rest;
  size_t next = 0;
  for (size_t i = 0; i < queue_.size(); ++i) {
    if (next < take && picked[next] == i) {
      batch.push_back(std::move(queue_[i]));
      ++next;
    } else {
      rest.push_back(std::move(queue_[i]));
    }
  }
  queue_.swap(rest);
  return batch;
}

}  // namespace manypy
