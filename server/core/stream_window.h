// StreamWindow: how many responses of one streaming request may wait
// unwritten between the worker that runs the model and the frontend that
// writes them to the client, so that a slow reader holds the model (and its
// interpreter) instead of the server buffering without bound. Thread-safe:
// Acquire on the worker, Release and Close on the frontend's threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

#include "common/mutex.h"
#include "common/status.h"
#include "server/inference/inference_request.h"

namespace manypy {

class StreamWindow {
 public:
  /// Responses a stream holds unwritten at most (those being written count).
  static constexpr size_t kDefaultCapacity = 8;

  explicit StreamWindow(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  /// Waits for room for one more response, then takes it. OK; CANCELLED
  /// when `client_left()` says so or the stream was closed; DEADLINE_EXCEEDED
  /// (naming `model`) when no room came within `stall_limit` (zero: no limit)
  /// or by the client's `deadline`.
  Status Acquire(const std::string& model, std::chrono::microseconds stall_limit,
                 Clock::time_point deadline, const std::function<bool()>& client_left);
  /// A response taken by Acquire was written (or dropped): frees its room.
  void Release();
  /// The client can receive nothing more (the connection broke): every
  /// Acquire from now on answers CANCELLED.
  void Close();

  size_t unwritten() const;

 private:
  const size_t capacity_;
  mutable Mutex mu_;
  std::condition_variable room_;
  size_t unwritten_ GUARDED_BY(mu_) = 0;
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace manypy
