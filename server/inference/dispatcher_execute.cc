// Dispatcher's running half: an execution started, run on its slot (a batch,
// or a stream's responses as they come), answered and ended; and nested calls
// run inline on their caller's slot. The queueing half is dispatcher.cc.
#include <utility>

#include "server/crash/running_calls.h"
#include "server/inference/batch_assembly.h"
#include "server/inference/dispatcher.h"
#include "server/inference/execution_context.h"
#include "server/inference/execution_outcome.h"
#include "server/inference/inference_observer.h"

namespace manypy {

void Dispatcher::Execute(size_t slot, const ExecutionPtr& execution) {
  DispatchedModel& model = *execution->model;
  Clock::time_point now = Clock::now();
  model.running_++;
  execution->started = now;
  if (model.limits().max_execution.count() > 0) {
    execution->interrupt_at = now + model.limits().max_execution;
    if (execution->interrupt_at < watchdog_wake_) watchdog_cv_.notify_one();
  }
  if (execution->deadline < watchdog_wake_ && execution->interruptible) {
    watchdog_cv_.notify_one();  // its deadline may pass before the watchdog's next look
  }
  running_.insert(execution);
  // A nested call runs on a slot its caller's execution holds already.
  bool was_executing = slots_.BeginExecuting(slot);
  mu_.Unlock();
  {
    ExecutionContext context;
    context.model = &model;
    context.requests = &execution->requests;
    context.slot = slot;
    context.deadline = execution->deadline;
    ScopedExecution current(&context);
    // What a crash report names (server/crash/): read from here, never locked.
    static const std::string kNoId;
    const std::string& id = execution->requests.empty() ? kNoId : execution->requests.front()->id;
    ScopedRunningCall running(slot, model.manifest().name, model.manifest().version, id,
                              execution->requests.size());
    Run(slot, *execution);
  }
  mu_.Lock();
  const Clock::time_point finished = Clock::now();
  if (!execution->streaming) NoteExecutionTime(model, finished - execution->started);
  last_end_ = finished;
  std::vector<std::string> ended = model.scheduler_->ExecutionEnded(slot, finished);
  if (!ended.empty()) {
    // A sequence ended: its state goes now, from the interpreter that held
    // it, before this slot starts anything else.
    mu_.Unlock();
    model.executable().DropSequenceStates(slot, ended);
    mu_.Lock();
  }
  slots_.EndExecuting(slot, was_executing);  // RunOnSlot may be waiting for this slot
  running_.erase(execution);
  model.running_--;
  LeaveIfDrained(execution->model);
  // A model at its instance limit may run again: wake a worker for it only
  // when it has work queued (a wake-up for nothing costs the running worker
  // a context switch on a small machine: this worker looks for work itself);
  // every worker when its work may be pinned to another slot.
  if (model.scheduler_->queued() > 0) {
    if (model.scheduler_->pins_slots()) {
      work_cv_.notify_all();
    } else if (slots_.AnyIdle()) {  // else every slot's runner looks for work itself
      work_cv_.notify_one();
    }
  }
  if (nested_waiting_ > 0) nested_cv_.notify_all();  // a nested request's model may run again
}

void Dispatcher::WaitNested(size_t slot, const std::shared_ptr<DispatchedModel>& model,
                            const InferenceRequest* request, const std::function<bool()>& answered) {
  MutexLock lock(mu_);
  ++nested_waiting_;
  while (!answered()) {
    // Unanswered, so alive: if it is queued, it is this request.
    if (!model->left_ && model->running_ < model->limits().instance_count) {
      RequestPtr mine = model->scheduler_->Take(request);
      if (mine != nullptr) {
        std::vector<RequestPtr> one;
        one.push_back(std::move(mine));
        Execute(slot, NewExecution(model, std::move(one)));
        continue;
      }
    }
    // Queued behind others, or running elsewhere: wait for an answer or a change.
    nested_cv_.wait(lock.native());
  }
  --nested_waiting_;
}

void Dispatcher::NestedAnswered() {
  MutexLock lock(mu_);
  nested_cv_.notify_all();
}

void Dispatcher::Run(size_t slot, Execution& execution) {
  DispatchedModel& model = *execution.model;
  const Manifest& m = model.manifest();
  if (m.streaming) {
    if (model.executable().continuous_batching() > 0) return RunBatch(slot, execution);
    return RunStream(slot, execution);
  }
  int64_t rows = 0;
  for (auto& r : execution.requests) {
    r->times.started = execution.started;
    rows += r->batch_rows;
  }
  InferenceObserver* observer = GetInferenceObserver();
  if (observer != nullptr) observer->OnExecutionStarted(m.name, m.version, slot);
  std::vector<Value> inputs = JoinInputs(execution.requests);
  std::string error_type;
  StatusOr<std::vector<Value>> outputs =
      model.executable().RunReportingError(slot, inputs, &execution.hook, &error_type);
  inputs.clear();
  Clock::time_point computed = Clock::now();
  if (execution.hook.fired()) error_type.clear();  // our interrupt, not the model's exception
  RecordExecution(model, slot, rows, execution.started, computed, error_type);

  Status status = outputs.ok() ? Status::Ok() : outputs.status();
  bool interrupted = execution.hook.fired();
  bool no_one_waits = false;  // only an interrupted execution needs the lock for it
  if (interrupted) {
    MutexLock lock(mu_);
    no_one_waits = execution.no_one_waits;
  }
  auto ran = std::chrono::duration_cast<std::chrono::microseconds>(computed - execution.started);
  std::vector<std::vector<Value>> split;
  if (status.ok() && !interrupted) {
    status = SplitOutputs(m, execution.requests, std::move(*outputs), &split);
  }
  {
    MutexLock lock(mu_);
    if (execution.answered) return;  // by Abandon
    execution.answered = true;       // from here on, only this thread answers
  }
  for (size_t i = 0; i < execution.requests.size(); ++i) {
    RequestPtr& r = execution.requests[i];
    r->times.computed = computed;
    if (interrupted) {
      // The answer, if any, reaches no one who waits for it (or is late).
      Status why = InterruptedStatus(execution, *r, no_one_waits, ran, Clock::now());
      FinishRequest(model, std::move(r), std::move(why), {}, rows);
    } else {
      FinishRequest(model, std::move(r), status, status.ok() ? std::move(split[i]) : std::vector<Value>{},
                    rows);
    }
  }
}

void Dispatcher::RunStream(size_t slot, Execution& execution) {
  DispatchedModel& model = *execution.model;
  const Manifest& m = model.manifest();
  // A streaming model never batches (manifest and settings refuse it): one request.
  RequestPtr& request = execution.requests.front();
  request->times.started = execution.started;
  InferenceObserver* observer = GetInferenceObserver();
  if (observer != nullptr) observer->OnExecutionStarted(m.name, m.version, slot);
  const std::chrono::microseconds limit = model.limits().max_execution;
  ResponseSink sink = [&](std::vector<Value>& outputs) -> Status {
    {
      MutexLock lock(mu_);
      if (execution.answered) return Unavailable("the server shut down during the stream");
      execution.interrupt_at = Clock::time_point::max();  // the reader's time is not the model's
    }
    Status sent = request->stream
                      ? request->stream(outputs, limit)
                      : Internal("model '" + m.name + "' streams, but its request has no stream");
    MutexLock lock(mu_);
    if (limit.count() > 0) execution.interrupt_at = Clock::now() + limit;
    return sent;
  };
  std::string error_type;
  Status status = model.executable().RunStream(slot, JoinInputs(execution.requests), &execution.hook,
                                               sink, &error_type);
  Clock::time_point computed = Clock::now();
  bool interrupted = execution.hook.fired();
  if (interrupted) error_type.clear();  // our interrupt, not the model's exception
  RecordExecution(model, slot, request->batch_rows, execution.started, computed, error_type);
  bool no_one_waits = false;
  {
    MutexLock lock(mu_);
    if (execution.answered) return;  // by Abandon
    execution.answered = true;
    no_one_waits = execution.no_one_waits;
  }
  request->times.computed = computed;
  // The sink's own reason (the client left, stalled) stands; an interrupt
  // that ended the model's computing says why it came.
  if (interrupted && (status.ok() || status.code() == StatusCode::kInternal)) {
    auto ran = std::chrono::duration_cast<std::chrono::microseconds>(computed - execution.started);
    status = InterruptedStatus(execution, *request, no_one_waits, ran, Clock::now());
  }
  int64_t rows = request->batch_rows;
  FinishRequest(model, std::move(request), std::move(status), {}, rows);
}

}  // namespace manypy
