// Executable: what the dispatcher runs, one loaded model version callable on
// any interpreter slot (a Python model in the pool; a fake in unit tests),
// and InterruptHook, how a running call is stopped. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/value.h"
#include "server/inference/stream_step.h"

namespace manypy {

/// Connects a running call to the watchdog that may stop it. The executable
/// arms it with how to interrupt the call while it runs; the watchdog fires it.
/// A fire that comes while the hook is not armed (a deadline that passed just
/// before the call started, or while a stream waited for its client) acts as
/// soon as the hook is armed: the call stops at once, not at the next fire.
class InterruptHook {
 public:
  void Arm(std::function<void()> interrupt) {
    MutexLock lock(mu_);
    interrupt_ = std::move(interrupt);
    if (fired_) interrupt_();
  }
  void Disarm() {
    MutexLock lock(mu_);
    interrupt_ = nullptr;
  }
  /// Interrupts the call if it is armed (again, if called again).
  void Fire() {
    MutexLock lock(mu_);
    fired_ = true;
    if (interrupt_) interrupt_();
  }
  bool fired() const {
    MutexLock lock(mu_);
    return fired_;
  }

 private:
  mutable Mutex mu_;
  std::function<void()> interrupt_ GUARDED_BY(mu_);
  bool fired_ GUARDED_BY(mu_) = false;
};

/// What a loaded model version holds, measured at load (model_memory.md in
/// docs/operations.md): `shared` once for the process however many
/// interpreters use it (a Python model's sealed copy of its archive, where its
/// weights are mapped from), `per_slot[i]` what loading it added in
/// interpreter slot i (its Python objects; 0 for a slot not prepared).
struct MemoryFootprint {
  int64_t shared_bytes = 0;
  std::vector<int64_t> per_slot_bytes;
  int64_t slot_total() const {
    int64_t total = 0;
    for (int64_t b : per_slot_bytes) total += b;
    return total;
  }
  int64_t total() const { return shared_bytes + slot_total(); }
};

/// Where a streaming call hands each response: its outputs in manifest order.
/// OK to go on; any other status ends the stream with that status.
using ResponseSink = std::function<Status(std::vector<Value>& outputs)>;

class Executable {
 public:
  virtual ~Executable() = default;
  /// Makes the model ready on slot `slot` (a Python model loads into that
  /// interpreter), so that a broken model fails here and not on its first
  /// request, and so that the load can happen while the slot serves nothing.
  /// A model failure is INTERNAL (FAILED_PRECONDITION for what the server
  /// lacks) naming it. By default there is nothing to do.
  virtual Status Prepare(size_t slot) {
    (void)slot;
    return Status::Ok();
  }
  /// Frees what the model holds on `slot` ahead of its destruction (a Python
  /// model drops its objects in that interpreter and collects its garbage),
  /// again so it can happen while the slot serves nothing. The model is not
  /// run on `slot` afterwards. By default there is nothing to do.
  virtual void Release(size_t slot) { (void)slot; }
  /// Calls the model once on interpreter slot `slot` with `inputs` in
  /// manifest order; returns its outputs in manifest order. Blocks. A model
  /// failure is INTERNAL naming the model and the exception. While the call
  /// can be interrupted, `hook` is armed.
  virtual StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                           InterruptHook* hook) = 0;
  /// As Run; when the model raised an exception, also names its type in
  /// `*error_type` (e.g. "ValueError"; for metrics). By default, Run.
  virtual StatusOr<std::vector<Value>> RunReportingError(size_t slot,
                                                         const std::vector<Value>& inputs,
                                                         InterruptHook* hook,
                                                         std::string* error_type) {
    (void)error_type;
    return Run(slot, inputs, hook);
  }
  /// Calls a streaming model (the manifest's `streaming`) once on slot `slot`:
  /// hands each response it yields to `sink`, in order, on this thread.
  /// Returns OK when the model's stream ended; the sink's status when the
  /// sink ended it (the model's generator is closed first: GeneratorExit at
  /// its yield); else the model's failure as RunReportingError (the
  /// responses already handed on stand). `hook` is armed while the model
  /// computes, not while the sink runs. By default: not a streaming model.
  virtual Status RunStream(size_t slot, const std::vector<Value>& inputs, InterruptHook* hook,
                           const ResponseSink& sink, std::string* error_type) {
    (void)slot, (void)inputs, (void)hook, (void)sink, (void)error_type;
    return Internal("this model does not stream its responses");
  }
  /// Continuous batching (a streaming model's start/step API,
  /// docs/text-generation.md): how many requests one step may advance; 0
  /// when the model does not opt in (then RunStream serves it). Known once
  /// Prepare has run.
  virtual size_t continuous_batching() const { return 0; }
  /// A request joins the running batch on slot `slot` under `key` (unique on
  /// that slot while it runs): the model's start(inputs) makes its state
  /// there. A failure fails this request alone (as RunReportingError's).
  virtual Status StartBatchedStream(size_t slot, uint64_t key, const std::vector<Value>& inputs,
                                    InterruptHook* hook, std::string* error_type) {
    (void)slot, (void)key, (void)inputs, (void)hook, (void)error_type;
    return Internal("this model does not batch its streams continuously");
  }
  /// One step of the running batch on `slot`: advances the states of `keys`,
  /// one StreamStep per key in order. An error status: the step failed and
  /// the model could not say for whom (every request of the step fails).
  virtual StatusOr<std::vector<StreamStep>> StepBatchedStreams(size_t slot,
                                                               const std::vector<uint64_t>& keys,
                                                               InterruptHook* hook,
                                                               std::string* error_type) {
    (void)slot, (void)keys, (void)hook, (void)error_type;
    return Internal("this model does not batch its streams continuously");
  }
  /// The requests of `keys` left the running batch on `slot`: their states go.
  virtual void EndBatchedStreams(size_t slot, const std::vector<uint64_t>& keys) {
    (void)slot, (void)keys;
  }
  /// Drops, in interpreter slot `slot`, the states of the sequences named by
  /// `keys` (manypy.request.state: they ended or timed out). Called by the
  /// worker of `slot` between calls. Nothing to do by default.
  virtual void DropSequenceStates(size_t slot, const std::vector<std::string>& keys) {
    (void)slot, (void)keys;
  }
  /// Whether firing the hook stops a running call (Python can be interrupted;
  /// a TorchScript call cannot and runs to its end).
  virtual bool interruptible() const { return true; }
  /// Whether the model is compiled by its first calls (torch.compile): its
  /// warm-up then also runs a batch of 2, which compiles the batch
  /// dimension dynamic. Known once Prepare has run.
  virtual bool compiled() const { return false; }
  /// What the model holds, as measured by its Prepare calls so far. By
  /// default nothing is known (a fake in unit tests sets what it pretends).
  virtual MemoryFootprint Memory() const { return {}; }
};

/// What names one loaded model's sequence states in its interpreters (with
/// each sequence's key): the load's address, unique while it lives, so a
/// reload's new load never sees the old one's states.
inline int64_t SequenceStateLoad(const Executable& model) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(&model));
}

}  // namespace manypy
