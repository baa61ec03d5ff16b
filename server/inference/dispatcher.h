// Dispatcher: the Schedule and Execute stages: a worker per interpreter, fair
// turns between models, a watchdog for deadlines and execution limits.
// Thread-safe. Lock order: mu_ before an InterruptHook's lock and before
// whatever a Retire callback takes; no GIL under mu_.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "server/inference/execution.h"
#include "server/inference/finish.h"
#include "server/inference/slot_table.h"
#include "server/inference/watchdog.h"

namespace manypy {

class Dispatcher {
 public:
  struct Options {
    size_t slots = 1;  ///< interpreters, one worker each
    /// A call still running after its interrupt is interrupted again this often
    /// (a model may catch the first one).
    std::chrono::milliseconds reinterrupt_interval{1000};
    /// SubmitOrRunHere runs a call on the submitting thread only for a model
    /// whose calls lately took less than this (zero, the default: never;
    /// manypy-server --run-to-completion-below-us). A frontend thread held
    /// by a call serves no other connection meanwhile; the hand-off to a
    /// worker it saves costs about 30-40 us of CPU and latency
    /// (docs/benchmarks.md, bench-overhead), so 1000 keeps that
    /// risk to calls it is a tenth of at least.
    std::chrono::microseconds run_here_below{0};
    /// With run_here_below set, SubmitOrRunHere runs a call on the submitting
    /// thread only when nothing else is queued or running and no execution
    /// ended within this long (zero: no such rule; manypy-server's default:
    /// 50 us, --run-to-completion-quiet-us). A frontend thread that has just
    /// answered a call here and at once takes the next request is most
    /// likely working through requests that arrived together (gRPC hands a
    /// callback thread all of one read's requests): run here, they would run
    /// one after another on that thread while the workers beside it idle
    /// (the trivial model lost 30% of its throughput at concurrency 16;
    /// docs/benchmarks.md, bench-overhead's "Run to completion").
    std::chrono::microseconds run_here_quiet{0};
  };

  explicit Dispatcher(Options options);
  /// Answers whatever is still queued UNAVAILABLE and joins the threads. No
  /// call may be stuck (Drain first; after a failed Drain, Abandon and exit).
  ~Dispatcher();

  /// Starts dispatching `model`'s requests.
  void Add(std::shared_ptr<DispatchedModel> model) EXCLUDES(mu_);
  /// `model` is being replaced or unloaded: it still takes requests from
  /// handles taken before (a reload fails no request) and leaves once
  /// nothing is queued or running; after that Submit hands them back.
  /// `on_drained` is called once as it leaves (at once if it is idle), under
  /// the dispatcher's lock, from whichever thread saw it drain: it must only
  /// hand the work on (the model manager posts the unload to its thread).
  void Retire(const std::shared_ptr<DispatchedModel>& model, std::function<void()> on_drained = {})
      EXCLUDES(mu_);
  /// For tests: whether `model` has left.
  bool TEST_Drained(const DispatchedModel& model) const EXCLUDES(mu_);

  /// Hands a prepared request to its model's scheduler and returns null. When
  /// it cannot be queued (queue full: RESOURCE_EXHAUSTED; shutting down:
  /// UNAVAILABLE) it is finished at once with that error. When `model` has
  /// left (a handle taken before a reload or unload, used after the old
  /// version drained) the request is returned untouched: the caller looks the
  /// model up again.
  /// `wake_worker` false: no idle worker is woken for it (its submitter is
  /// about to run it itself: WaitNested), so no thread hand-off is paid.
  [[nodiscard]] RequestPtr Submit(const std::shared_ptr<DispatchedModel>& model, RequestPtr request,
                                  bool wake_worker = true) EXCLUDES(mu_);

  /// Run to completion: Submit, and then, when an interpreter's worker waits
  /// for work and the model may run on a frontend thread (not streaming, no
  /// sequences, its calls lately shorter than Options::run_here_below), the
  /// calling thread takes that slot for one execution instead of waking the
  /// worker: the one the slot's worker would start (FindWork: the schedulers
  /// form batches, models take turns, so no queued request is overtaken;
  /// limits, deadlines and expiry as ever), normally the request just queued
  /// (none when the next model in turn is one only a worker runs); then it
  /// gives the slot back and wakes a worker for what is left. Each call is an execution like any
  /// other (counted, watched and interrupted, its nested calls on its slot,
  /// named in a crash report). Only from a thread that runs no model call (a
  /// frontend's); the request may be answered before this returns.
  [[nodiscard]] RequestPtr SubmitOrRunHere(const std::shared_ptr<DispatchedModel>& model,
                                           RequestPtr request) EXCLUDES(mu_);

  /// Waits, for a model's own request to another model (manypy.infer) made
  /// while it runs on worker slot `slot`, until `answered()`; `request` was
  /// handed to `model` by Submit. While it waits, whenever the request is
  /// still queued and `model` may start another execution, it runs it here,
  /// on `slot`: the caller's interpreter, whose Python waits with its GIL
  /// released. So a nested call never waits for an interpreter that only its
  /// own caller could free: with every interpreter held by a waiting caller,
  /// each caller runs its own callee (cycles are refused before they reach
  /// here: python_services.cc). `request` is only compared, never used.
  void WaitNested(size_t slot, const std::shared_ptr<DispatchedModel>& model,
                  const InferenceRequest* request, const std::function<bool()>& answered)
      EXCLUDES(mu_);
  /// A nested request was answered: wakes WaitNested.
  void NestedAnswered() EXCLUDES(mu_);

  /// Shutdown: refuses new requests, then waits until nothing is queued or
  /// running, at most until `deadline`. Returns whether everything drained.
  bool Drain(Clock::time_point deadline) EXCLUDES(mu_);
  /// Answers every queued and running request UNAVAILABLE (the server gives
  /// up on them); a running call that returns later is not answered again.
  /// Returns how many calls were still running.
  size_t Abandon() EXCLUDES(mu_);

  /// Runs `work` on the caller's thread while slot `slot` starts no request:
  /// takes the slot out of dispatch at once, waits for the execution running
  /// there (if any) to end, runs `work`, then gives the slot back. Every
  /// other slot serves on, so loading, warming up or unloading a model one
  /// interpreter at a time never stops the server answering. One holder per
  /// slot at a time; a second caller waits for the first. Never call it from
  /// a model's own call (it would wait for itself).
  void RunOnSlot(size_t slot, const std::function<void()>& work) EXCLUDES(mu_);
  /// For tests: whether a RunOnSlot holds `slot` (or waits there for its running call).
  bool TEST_SlotHeld(size_t slot) const EXCLUDES(mu_);
  /// For tests: whether SubmitOrRunHere could run a call on `slot` now.
  bool TEST_SlotIdle(size_t slot) const EXCLUDES(mu_);

  size_t queued(const DispatchedModel& model) const EXCLUDES(mu_);

  /// One dispatched model version's load right now (for metrics at scrape time).
  struct ModelLoad {
    std::string name;
    int64_t version = 0;
    size_t queued = 0;
    size_t running = 0;
    size_t streams = 0;  ///< streaming requests running (in running batches or alone)
  };
  std::vector<ModelLoad> Loads() const EXCLUDES(mu_);
  size_t slots() const { return options_.slots; }

 private:
  void Work(size_t slot) EXCLUDES(mu_);
  void Watch() EXCLUDES(mu_);
  void Run(size_t slot, Execution& execution) EXCLUDES(mu_);
  /// Run for a streaming model: its one request's responses go to the
  /// request's `stream` as the model yields them. The execution limit bounds
  /// the model's time to each response, not the client's time to read it.
  void RunStream(size_t slot, Execution& execution) EXCLUDES(mu_);
  /// Run for a streaming model that batches continuously
  /// (Executable::continuous_batching): the execution is the slot's running
  /// batch. Requests queued for the model join it at each step boundary, up
  /// to the model's size; each leaves at a boundary when it finishes, fails,
  /// is cancelled or passes its deadline, the others going on; it ends when
  /// none is left (dispatcher_batch.cc).
  void RunBatch(size_t slot, Execution& execution) EXCLUDES(mu_);
  /// RunBatch's parts. Moves up to `room` queued requests of the execution's
  /// model into it (and the expired ones into `expired`); returns them.
  std::vector<InferenceRequest*> JoinBatch(
      size_t slot, Execution& execution, size_t room,
      std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>>* expired) REQUIRES(mu_);
  /// Moves the requests in `leaving` out of the execution; empty when Abandon
  /// answered them already (then nothing more may touch them).
  std::vector<RequestPtr> LeaveBatch(Execution& execution,
                                     const std::vector<InferenceRequest*>& leaving) REQUIRES(mu_);
  /// Starts `execution` of its model (counted as running, watched), runs it
  /// on `slot` on this thread, and ends it (mu_ released while it runs).
  void Execute(size_t slot, const std::shared_ptr<Execution>& execution) REQUIRES(mu_);
  /// The next execution the free worker of `slot` may start, or null.
  /// Expired requests found on the way go to `expired`.
  /// `lent`: for a turn on a slot lent to SubmitOrRunHere, which ends (null)
  /// when the next model in turn with work queued does not RunsHere.
  ExecutionPtr FindWork(
      size_t slot, Clock::time_point now, Clock::time_point* wake,
      std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>>* expired,
      bool lent = false) REQUIRES(mu_);
  void LeaveIfDrained(const std::shared_ptr<DispatchedModel>& model) REQUIRES(mu_);
  /// What Submit and SubmitOrRunHere do after queueing the request.
  enum class Then { kWakeWorker, kNothing, kRunHere };
  RequestPtr Hand(const std::shared_ptr<DispatchedModel>& model, RequestPtr request, Then then)
      EXCLUDES(mu_);
  /// Whether `model`'s calls may run on a frontend thread at all.
  bool RunsHere(const DispatchedModel& model) const REQUIRES(mu_);
  /// The slot SubmitOrRunHere may lend for a request of `model` just queued, or none.
  std::optional<size_t> SlotToRunHere(const DispatchedModel& model) const REQUIRES(mu_);
  /// One turn on lent `slot`: runs what FindWork hands it (the request just
  /// queued first, unless older work is due) for up to run_here_below, then
  /// gives the slot back.
  void RunHere(size_t slot) REQUIRES(mu_);
  /// Keeps `model`'s recent execution time (what SlotToRunHere reads).
  void NoteExecutionTime(DispatchedModel& model, Clock::duration took) REQUIRES(mu_);
  /// Nothing queued or running in any model.
  bool IdleLocked() const REQUIRES(mu_);
  /// Whether the models' queues hold more than `n` requests in all.
  bool QueuedMoreThan(size_t n) const REQUIRES(mu_);
  /// Answers a request that left its queue unrun (ExpiredStatus).
  static void Expire(const DispatchedModel& model, RequestPtr request);

  const Options options_;
  mutable Mutex mu_;
  std::condition_variable work_cv_;      // work may be available
  std::condition_variable watchdog_cv_;  // a deadline may have moved earlier
  std::condition_variable idle_cv_;      // a model drained / everything idle
  std::condition_variable nested_cv_;    // a nested request was answered, or an execution ended
  size_t nested_waiting_ GUARDED_BY(mu_) = 0;  // SubmitNested calls waiting
  std::vector<std::shared_ptr<DispatchedModel>> models_ GUARDED_BY(mu_);  // dispatch order
  size_t cursor_ GUARDED_BY(mu_) = 0;                                     // next model to serve
  std::set<ExecutionPtr> running_ GUARDED_BY(mu_);
  SlotTable slots_ GUARDED_BY(mu_);
  /// Drops `drops` on `slot`, which this worker holds (mu_ released meanwhile).
  void DropStates(size_t slot, std::vector<SlotTable::StateDrop> drops) REQUIRES(mu_);
  Clock::time_point watchdog_wake_ GUARDED_BY(mu_);
  Clock::time_point last_end_ GUARDED_BY(mu_){};  // the last execution's end (run_here_quiet)
  bool draining_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
  std::thread watchdog_;
};

}  // namespace manypy
