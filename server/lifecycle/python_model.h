// PythonModel: one model archive loaded into every interpreter of a pool, all sharing
// one mapped copy of its weights; the Executable the dispatcher runs for a Python model.
// Thread-safe: Run and Call may be called from any number of threads, each leases one interpreter.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "interpreters/pool.h"
#include "interpreters/python_error.h"
#include "package_format/archive.h"
#include "package_format/mapped_storages.h"
#include "server/inference/executable.h"

namespace manypy {

class PythonModel final : public Executable {
 public:
  /// Validates the archive, maps its storages once and loads the model in
  /// every interpreter of `pool` (in parallel). The pool must outlive the model.
  /// Errors: the archive's (NOT_FOUND / INVALID_ARGUMENT); FAILED_PRECONDITION
  /// for a device this server's libtorch lacks (cuda without CUDA) or for
  /// extern modules the server's Python cannot import (each named); for
  /// another Python failure while loading, INTERNAL with the exception type
  /// and message.
  static StatusOr<std::unique_ptr<PythonModel>> Load(InterpreterPool* pool,
                                                      const std::string& archive_path);
  /// As above, for an archive already opened (and validated).
  static StatusOr<std::unique_ptr<PythonModel>> Load(InterpreterPool* pool,
                                                      std::unique_ptr<PackageArchive> archive);
  /// Readies every interpreter of `pool` to load archives (each at once, in
  /// a thread of its own: call it before any model loads): defines the model
  /// runtime there, which imports torch.package, so that no load, the first
  /// one on demand included, pays for that (about 100 ms), and the server's
  /// memory at rest includes what every load needs. The runtime's objects
  /// then live as long as the interpreter and are frozen (gc.freeze), as
  /// start-up's are.
  static Status PrepareInterpreters(InterpreterPool* pool);
  /// As Load, but loads the model in no interpreter yet: Prepare(slot) does,
  /// one interpreter at a time (the model manager, while the others serve).
  /// Only the archive's and device errors here; the Python ones come from Prepare.
  static StatusOr<std::unique_ptr<PythonModel>> Open(InterpreterPool* pool,
                                                      std::unique_ptr<PackageArchive> archive);

  /// Drops the model in every interpreter not yet released, then runs each
  /// one's cyclic garbage collector (takes those interpreters in turn; see the
  /// .cc for why).
  ~PythonModel() override;

  /// Loads the model in interpreter `slot` (Load's Python errors).
  Status Prepare(size_t slot) override;
  /// Drops the model in interpreter `slot` and collects that interpreter's garbage.
  void Release(size_t slot) override;

  const Manifest& manifest() const { return archive_->manifest(); }
  /// Whether the model is torch.compile'd (Executable::compiled).
  bool compiled() const override { return compiled_.load(); }

  /// Runs the model once on interpreter `slot`, interruptible through `hook`.
  StatusOr<std::vector<Value>> Run(size_t slot, const std::vector<Value>& inputs,
                                   InterruptHook* hook) override;
  /// As Run; a Python exception's qualified type goes to `*error_type`.
  StatusOr<std::vector<Value>> RunReportingError(size_t slot, const std::vector<Value>& inputs,
                                                 InterruptHook* hook,
                                                 std::string* error_type) override;

  /// Runs a streaming model once on interpreter `slot` (Executable::RunStream).
  Status RunStream(size_t slot, const std::vector<Value>& inputs, InterruptHook* hook,
                   const ResponseSink& sink, std::string* error_type) override;

  /// Continuous batching (Executable's): the model's start/step in interpreter `slot`.
  size_t continuous_batching() const override { return continuous_batching_.load(); }
  Status StartBatchedStream(size_t slot, uint64_t key, const std::vector<Value>& inputs,
                            InterruptHook* hook, std::string* error_type) override;
  StatusOr<std::vector<StreamStep>> StepBatchedStreams(size_t slot, const std::vector<uint64_t>& keys,
                                                       InterruptHook* hook,
                                                       std::string* error_type) override;
  void EndBatchedStreams(size_t slot, const std::vector<uint64_t>& keys) override;

  /// Drops those sequences' states in interpreter `slot` (not after Release).
  void DropSequenceStates(size_t slot, const std::vector<std::string>& keys) override;

  /// Runs the model once on any interpreter: `inputs` in manifest order
  /// (tensors, or lists of bytes for BYTES inputs); returns the outputs in
  /// manifest order; INTERNAL naming the model's exception when it raises.
  StatusOr<std::vector<Value>> Call(const std::vector<Value>& inputs) const;

  /// The sealed copy of the archive (mapped once: the weights) and, per
  /// interpreter, what its Prepare added: the Python heap grown during the
  /// load (tracemalloc, that interpreter's own allocator only) plus the
  /// model's tensors not mapped from the archive.
  MemoryFootprint Memory() const override;

  /// This model's Python object in the session's interpreter (tests, tools).
  Obj In(InterpreterSession& session) const { return model_.In(session); }

 private:
  PythonModel(InterpreterPool* pool, std::unique_ptr<PackageArchive> archive,
                std::shared_ptr<MappedStorages> storages, ReplicatedObject model,
                ReplicatedObject runner, ReplicatedObject batch, std::string heap_key)
      : pool_(pool),
        archive_(std::move(archive)),
        storages_(std::move(storages)),
        heap_key_(std::move(heap_key)),
        model_(std::move(model)),
        runner_(std::move(runner)),
        batch_(std::move(batch)),
        released_(pool->size(), false),
        slot_bytes_(pool->size(), 0) {}

  /// Runs interpreter `slot`'s cyclic garbage collector (never throws).
  void CollectGarbage(size_t slot);

  // Constant after Load.
  InterpreterPool* const pool_;
  std::unique_ptr<PackageArchive> archive_;
  std::shared_ptr<MappedStorages> storages_;
  const std::string heap_key_;  // the archive file's key in PythonHeapMeasurements
  ReplicatedObject model_;   // the user's model object
  // infer(inputs), or for a streaming model start_stream(inputs), with the
  // model, method, output names and device bound.
  ReplicatedObject runner_;
  // For a streaming model, its running batch's states in each interpreter
  // (the runtime's Batch), used when the model opts into continuous batching.
  ReplicatedObject batch_;
  mutable Mutex released_mu_;
  std::vector<bool> released_ GUARDED_BY(released_mu_);       // per interpreter, by Release
  std::vector<int64_t> slot_bytes_ GUARDED_BY(released_mu_);  // measured by Prepare
  std::atomic<bool> compiled_{false};  // set by Prepare
  std::atomic<size_t> continuous_batching_{0};  // set by Prepare
};

}  // namespace manypy
