// InferenceRequest and InferenceResult: one request on its way through the
// transport-neutral pipeline (Prepare -> Schedule -> Execute -> Finish).
// Plain data; a request is owned by exactly one stage at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "interpreters/value.h"
#include "server/inference/request_trace.h"
#include "server/inference/shared_memory_regions.h"
#include "server/inference/shared_memory_views.h"

namespace manypy {

using Clock = std::chrono::steady_clock;

/// Where a request's time went (for statistics and metrics).
struct RequestTimes {
  Clock::time_point received;  ///< the frontend got it
  Clock::time_point prepared;  ///< decoded and handed to the scheduler
  Clock::time_point started;   ///< its batch began executing
  Clock::time_point computed;  ///< its batch returned
  Clock::time_point finished;  ///< outputs checked, about to reply
  /// The response cache's part, for a model that caches: hit (answered from
  /// it: a success, but neither queued nor computed) or miss, and the time
  /// its key, lookup and copy out (hit) or insert (miss) took.
  enum class Cache { kNone, kHit, kMiss } cache = Cache::kNone;
  std::chrono::nanoseconds cache_time{0};
};

struct InferenceRequest {
  /// Inputs that view a client's shared-memory region (first, so that it is
  /// released last, after `inputs`): see SharedMemoryViews.
  SharedMemoryViews shm_views;
  /// Requested outputs to be written into a shared-memory region, by name
  /// (resolved by Prepare, so a bad region fails before the model runs).
  std::map<std::string, SharedMemoryRef> output_regions;
  std::string id;
  /// The request's parameters (a dict of name -> bool, int, float or str),
  /// for the model's Python (manypy.request.parameters).
  Value parameters = Value::Dict({});
  /// For a request a model made (manypy.infer): the models of the calls it
  /// runs inside, outermost first (the caller's last). Empty for a client's.
  std::vector<std::string> callers;
  /// The model's positional arguments in manifest order: tensors, or nested
  /// lists of bytes for BYTES inputs. With batching, dim 0 is the batch.
  std::vector<Value> inputs;
  /// Rows along dim 0 (1 when the model takes no batch dimension).
  int64_t batch_rows = 1;
  /// Each input's shape without the batch dimension: requests batch together
  /// only when these are equal.
  std::vector<std::vector<int64_t>> item_shapes;
  /// When the request must have started: the earlier of the client's
  /// deadline and the model's default timeout (a queue policy, as Triton's),
  /// else max().
  Clock::time_point deadline = Clock::time_point::max();
  /// The client's own deadline (max(): none). Past it, a running call is
  /// interrupted: no one waits for its answer any more.
  Clock::time_point client_deadline = Clock::time_point::max();
  /// Optional: whether the client gave up (checked before running).
  std::function<bool()> cancelled;
  /// Whether the client has gone (cancelled, disconnected); false without a `cancelled`.
  bool ClientLeft() const { return cancelled && cancelled(); }
  /// Finish, called once from any thread: `encode` turns the model's outputs
  /// (this request's rows, manifest order) into the frontend's response
  /// (INTERNAL, naming the output, when they break the manifest); `reply`
  /// then answers the client with the final status.
  std::function<Status(std::vector<Value>& outputs)> encode;
  std::function<void(const Status& status)> reply;
  /// Set for a request to a streaming model (and then `encode` is not):
  /// called from the worker for each response the model yields, in order,
  /// with its outputs (manifest order). Encodes and queues it for the client,
  /// waiting while the stream already holds its limit of unwritten responses.
  /// A non-OK status ends the stream: CANCELLED (the client left),
  /// DEADLINE_EXCEEDED (the client read nothing for `stall_limit`, or its
  /// deadline passed), INTERNAL (the outputs break the manifest). `reply`
  /// then gives the final status.
  std::function<Status(std::vector<Value>& outputs, std::chrono::microseconds stall_limit)> stream;
  RequestTimes times;
  /// Held from its model's Infer until the request goes (after Finish): its
  /// model version counts it in flight (lifecycle/model_leases.h). Null unless
  /// the server keeps a memory budget.
  std::shared_ptr<void> lease;
  /// Its span in a distributed trace (request_trace.h); null when tracing is
  /// off. Ended by Finish.
  std::shared_ptr<RequestSpan> span;
};

}  // namespace manypy
