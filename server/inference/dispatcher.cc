#include "server/inference/dispatcher.h"

#include <algorithm>
#include <utility>

#include "server/inference/batch_assembly.h"
#include "server/inference/execution_context.h"
#include "server/inference/inference_observer.h"
#include "common/thread_name.h"
#include "server/log.h"

namespace manypy {
namespace {

constexpr auto kWatchdogPeriod = std::chrono::milliseconds(100);
// How long a streaming model whose clients all left may compute before it is
// interrupted: at its next yield its stream closes the generator cleanly
// (GeneratorExit, its finally blocks run), which an interrupt would not.
constexpr auto kStreamCloseGrace = std::chrono::milliseconds(100);

std::string Seconds(std::chrono::microseconds d) {
  char text[32];
  snprintf(text, sizeof(text), "%g", std::chrono::duration<double>(d).count());
  return text;
}

void LogSequenceTimedOut(const DispatchedModel& model, const Scheduler::ClosedSequence& c) {
  const Manifest& m = model.manifest();
  Log(LogLevel::kInfo, "model '" + m.name + "' version " + std::to_string(m.version) +
                           ": sequence " + c.key + " timed out after " + Seconds(c.idle) +
                           " s without a request (max_sequence_idle_microseconds " +
                           std::to_string(model.sequences().max_sequence_idle_microseconds) +
                           "); its state is dropped");
}

}  // namespace

Dispatcher::Dispatcher(Options options)
    : options_(options),
      slot_executing_(options.slots, false),
      slot_held_(options.slots, false),
      slot_drops_(options.slots) {
  for (size_t slot = 0; slot < options_.slots; ++slot) {
    workers_.emplace_back([this, slot] {
      NameThisThread(("manypy-worker-" + std::to_string(slot)).c_str());
      Work(slot);
    });
  }
  watchdog_ = std::thread([this] {
    NameThisThread("manypy-watchdog");
    Watch();
  });
}

Dispatcher::~Dispatcher() {
  std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = draining_ = true;
    for (auto& model : models_) {
      for (auto& r : model->scheduler_->TakeAll()) left.emplace_back(model, std::move(r));
    }
  }
  for (auto& [model, r] : left) {
    FinishRequest(*model, std::move(r), Unavailable("the server is shutting down"), {}, 0);
  }
  work_cv_.notify_all();
  slot_cv_.notify_all();
  watchdog_cv_.notify_all();
  for (auto& w : workers_) w.join();
  watchdog_.join();
}

void Dispatcher::Add(std::shared_ptr<DispatchedModel> model) {
  std::lock_guard<std::mutex> lock(mu_);
  models_.push_back(std::move(model));
}

void Dispatcher::Retire(const std::shared_ptr<DispatchedModel>& model, std::function<void()> on_drained) {
  std::lock_guard<std::mutex> lock(mu_);
  model->retired_ = true;
  model->on_drained_ = std::move(on_drained);
  LeaveIfDrained(model);
}

bool Dispatcher::TEST_Drained(const DispatchedModel& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  return model.left_;
}

void Dispatcher::LeaveIfDrained(const std::shared_ptr<DispatchedModel>& model) {
  if (!model->retired_ || model->left_ || model->running_ > 0 || model->scheduler_->queued() > 0) {
    return;
  }
  model->left_ = true;
  auto it = std::find(models_.begin(), models_.end(), model);
  if (it != models_.end()) {
    size_t index = static_cast<size_t>(it - models_.begin());
    models_.erase(it);
    if (cursor_ > index) --cursor_;
  }
  idle_cv_.notify_all();
  if (model->on_drained_) std::exchange(model->on_drained_, nullptr)();
}

RequestPtr Dispatcher::Submit(const std::shared_ptr<DispatchedModel>& model, RequestPtr request,
                              bool wake_worker) {
  Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) {
      status = Unavailable("the server is shutting down");
    } else if (model->left_) {  // a handle taken before the swap, used after the drain
      return request;
    } else {
      Clock::time_point deadline = request->deadline;
      status = model->scheduler_->Enqueue(&request);
      if (status.ok() && deadline < watchdog_wake_) watchdog_cv_.notify_one();
    }
  }
  if (!status.ok()) {
    FinishRequest(*model, std::move(request), status, {}, 0);
    return nullptr;
  }
  // A request pinned to one slot (a sequence's) needs that slot's worker:
  // any one woken might be another's.
  if (model->scheduler_->pins_slots()) {
    work_cv_.notify_all();
  } else if (wake_worker) {
    work_cv_.notify_one();
  }
  return nullptr;
}

Dispatcher::ExecutionPtr Dispatcher::FindWork(
    size_t slot, Clock::time_point now, Clock::time_point* wake,
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>>* expired) {
  // Round robin from the model after the last one served: a hot model cannot
  // starve a cold one.
  for (size_t n = 0; n < models_.size(); ++n) {
    size_t index = (cursor_ + n) % models_.size();
    const std::shared_ptr<DispatchedModel>& model = models_[index];
    if (model->running_ >= model->limits().instance_count) continue;
    std::vector<RequestPtr> gone;
    Clock::time_point ignored = Clock::time_point::max();
    model->scheduler_->Expire(now, &gone, &ignored);
    for (auto& r : gone) expired->emplace_back(model, std::move(r));
    std::vector<RequestPtr> batch = model->scheduler_->Next(slot, now, model->running_ == 0, wake);
    if (batch.empty()) continue;
    cursor_ = (index + 1) % models_.size();
    auto execution = std::make_shared<Execution>();
    execution->model = model;
    execution->requests = std::move(batch);
    for (const auto& r : execution->requests) {
      execution->deadline = std::max(execution->deadline, r->client_deadline);
    }
    return execution;
  }
  return nullptr;
}

void Dispatcher::Work(size_t slot) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (slot_held_[slot]) {
      if (stopping_) return;
      // A Submit may have woken this worker rather than a free one: pass it on.
      work_cv_.notify_one();
      slot_cv_.wait(lock);
      continue;
    }
    if (!slot_drops_[slot].empty() && !stopping_) {  // at shutdown they go with the models
      DropStates(slot, std::exchange(slot_drops_[slot], {}), lock);
      continue;
    }
    Clock::time_point now = Clock::now();
    Clock::time_point wake = Clock::time_point::max();
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> expired;
    ExecutionPtr execution = FindWork(slot, now, &wake, &expired);
    if (!expired.empty()) {
      lock.unlock();
      for (auto& [model, r] : expired) Expire(*model, std::move(r));
      lock.lock();
      for (auto& [model, r] : expired) LeaveIfDrained(model);
      if (execution == nullptr) continue;
    }
    if (execution == nullptr) {
      if (stopping_) return;
      if (draining_ && IdleLocked()) idle_cv_.notify_all();
      if (wake == Clock::time_point::max()) {
        work_cv_.wait(lock);
      } else {
        work_cv_.wait_until(lock, wake);
      }
      continue;
    }
    Execute(slot, execution, lock);
  }
}

void Dispatcher::Execute(size_t slot, const ExecutionPtr& execution, std::unique_lock<std::mutex>& lock) {
  DispatchedModel& model = *execution->model;
  Clock::time_point now = Clock::now();
  model.running_++;
  execution->started = now;
  if (model.limits().max_execution.count() > 0) {
    execution->interrupt_at = now + model.limits().max_execution;
    if (execution->interrupt_at < watchdog_wake_) watchdog_cv_.notify_one();
  }
  if (execution->deadline < watchdog_wake_ && model.executable().interruptible()) {
    watchdog_cv_.notify_one();  // its deadline may pass before the watchdog's next look
  }
  running_.insert(execution);
  // A nested call runs on a slot its caller's execution holds already.
  bool was_executing = slot_executing_[slot];
  slot_executing_[slot] = true;
  lock.unlock();
  {
    ExecutionContext context;
    context.model = &model;
    context.requests = &execution->requests;
    context.slot = slot;
    context.deadline = execution->deadline;
    ScopedExecution current(&context);
    Run(slot, *execution);
  }
  lock.lock();
  std::vector<std::string> ended = model.scheduler_->ExecutionEnded(slot, Clock::now());
  if (!ended.empty()) {
    // A sequence ended: its state goes now, from the interpreter that held
    // it, before this slot starts anything else.
    lock.unlock();
    model.executable().DropSequenceStates(slot, ended);
    lock.lock();
  }
  slot_executing_[slot] = was_executing;
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
    } else {
      work_cv_.notify_one();
    }
  }
  slot_cv_.notify_all();  // RunOnSlot may be waiting for this slot
  if (nested_waiting_ > 0) nested_cv_.notify_all();  // a nested request's model may run again
}

void Dispatcher::DropStates(size_t slot, std::vector<StateDrop> drops,
                            std::unique_lock<std::mutex>& lock) {
  slot_executing_[slot] = true;  // RunOnSlot waits for it, as for a call
  lock.unlock();
  for (const StateDrop& d : drops) d.model->executable().DropSequenceStates(slot, {d.key});
  drops.clear();  // the models' last references may go here, outside mu_
  lock.lock();
  slot_executing_[slot] = false;
  slot_cv_.notify_all();
}

void Dispatcher::WaitNested(size_t slot, const std::shared_ptr<DispatchedModel>& model,
                            const InferenceRequest* request, const std::function<bool()>& answered) {
  std::unique_lock<std::mutex> lock(mu_);
  ++nested_waiting_;
  while (!answered()) {
    // Unanswered, so alive: if it is queued, it is this request.
    if (!model->left_ && model->running_ < model->limits().instance_count) {
      RequestPtr mine = model->scheduler_->Take(request);
      if (mine != nullptr) {
        auto execution = std::make_shared<Execution>();
        execution->model = model;
        execution->deadline = mine->client_deadline;
        execution->requests.push_back(std::move(mine));
        Execute(slot, execution, lock);
        continue;
      }
    }
    // Queued behind others, or running elsewhere: wait for an answer or a change.
    nested_cv_.wait(lock);
  }
  --nested_waiting_;
}

void Dispatcher::NestedAnswered() {
  std::lock_guard<std::mutex> lock(mu_);
  nested_cv_.notify_all();
}

void Dispatcher::RunOnSlot(size_t slot, const std::function<void()>& work) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    slot_cv_.wait(lock, [&] { return !slot_held_[slot]; });
    // Held before the running call ends, so the worker starts nothing new:
    // a busy slot must not keep a load waiting for as long as requests come.
    slot_held_[slot] = true;
    slot_cv_.wait(lock, [&] { return !slot_executing_[slot]; });
  }
  struct GiveBack {
    Dispatcher* d;
    size_t slot;
    ~GiveBack() {
      {
        std::lock_guard<std::mutex> lock(d->mu_);
        d->slot_held_[slot] = false;
      }
      d->slot_cv_.notify_all();
      d->work_cv_.notify_all();  // requests may have queued while the slot was held
    }
  } give_back{this, slot};
  work();
}

bool Dispatcher::TEST_SlotHeld(size_t slot) const {
  std::lock_guard<std::mutex> lock(mu_);
  return slot_held_[slot];
}

void Dispatcher::Run(size_t slot, Execution& execution) {
  DispatchedModel& model = *execution.model;
  const Manifest& m = model.manifest();
  if (m.streaming) return RunStream(slot, execution);
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
    std::lock_guard<std::mutex> lock(mu_);
    no_one_waits = execution.no_one_waits;
  }
  auto ran = std::chrono::duration_cast<std::chrono::microseconds>(computed - execution.started);
  std::vector<std::vector<Value>> split;
  if (status.ok() && !interrupted) {
    status = SplitOutputs(m, execution.requests, std::move(*outputs), &split);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (execution.answered) return;  // by Abandon
    execution.answered = true;       // from here on, only this thread answers
  }
  for (size_t i = 0; i < execution.requests.size(); ++i) {
    RequestPtr& r = execution.requests[i];
    r->times.computed = computed;
    if (interrupted) {
      // The answer, if any, reaches no one who waits for it (or is late).
      Status why = InterruptedStatus(execution, *r, no_one_waits, ran);
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
      std::lock_guard<std::mutex> lock(mu_);
      if (execution.answered) return Unavailable("the server shut down during the stream");
      execution.interrupt_at = Clock::time_point::max();  // the reader's time is not the model's
    }
    Status sent = request->stream
                      ? request->stream(outputs, limit)
                      : Internal("model '" + m.name + "' streams, but its request has no stream");
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    if (execution.answered) return;  // by Abandon
    execution.answered = true;
    no_one_waits = execution.no_one_waits;
  }
  request->times.computed = computed;
  // The sink's own reason (the client left, stalled) stands; an interrupt
  // that ended the model's computing says why it came.
  if (interrupted && (status.ok() || status.code() == StatusCode::kInternal)) {
    auto ran = std::chrono::duration_cast<std::chrono::microseconds>(computed - execution.started);
    status = InterruptedStatus(execution, *request, no_one_waits, ran);
  }
  int64_t rows = request->batch_rows;
  FinishRequest(model, std::move(request), std::move(status), {}, rows);
}

Status Dispatcher::InterruptedStatus(const Execution& execution, const InferenceRequest& request,
                                     bool no_one_waits, std::chrono::microseconds ran) {
  const DispatchedModel& model = *execution.model;
  const std::string& name = model.manifest().name;
  if (!no_one_waits && model.manifest().streaming) {
    return DeadlineExceeded("model '" + name + "' took longer than its execution limit of " +
                            Seconds(model.limits().max_execution) +
                            " s to yield its next response and was interrupted");
  }
  if (!no_one_waits) {
    return DeadlineExceeded("model '" + name + "' ran longer than its execution limit of " +
                            Seconds(model.limits().max_execution) + " s and was " +
                            (model.executable().interruptible()
                                 ? "interrupted"
                                 : "answered as failed when it ended (its calls cannot be "
                                   "interrupted)"));
  }
  // Queued requests that end so are answered alike (Expire). A deadline that
  // passed comes first: gRPC also reports such a call as cancelled.
  if (Clock::now() >= request.client_deadline || !request.ClientLeft()) {
    return DeadlineExceeded("the deadline of the request to model '" + name +
                            "' passed while it ran; the call was interrupted after " +
                            Seconds(ran) + " s");
  }
  return Cancelled("the client left its request to model '" + name +
                   "' while it ran; the call was interrupted after " + Seconds(ran) + " s");
}

void Dispatcher::Expire(const DispatchedModel& model, RequestPtr request) {
  const std::string& name = model.manifest().name;
  // A deadline that passed comes first: gRPC also reports such a call as cancelled.
  if (Clock::now() < request->deadline && request->ClientLeft()) {
    FinishRequest(model, std::move(request),
                  Cancelled("the client cancelled its request to model '" + name + "' before it ran"),
                  {}, 0);
    return;
  }
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() -
                                                                      request->times.prepared);
  FinishRequest(model, std::move(request),
                DeadlineExceeded("the deadline of the request to model '" + name + "' passed after " +
                                 std::to_string(waited.count()) + " ms in its queue; it was not run"),
                {}, 0);
}

bool Dispatcher::StreamGraceOver(Execution& execution, Clock::time_point now) {
  if (!execution.model->manifest().streaming) return true;
  if (execution.no_one_waits_since == Clock::time_point::max()) execution.no_one_waits_since = now;
  return now - execution.no_one_waits_since >= kStreamCloseGrace;
}

bool Dispatcher::NoOneWaits(const Execution& execution, Clock::time_point now) {
  if (now >= execution.deadline) return true;
  for (const auto& r : execution.requests) {
    bool gone = now >= r->client_deadline || r->ClientLeft();
    if (!gone) return false;
  }
  return !execution.requests.empty();
}

void Dispatcher::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    Clock::time_point now = Clock::now();
    Clock::time_point wake = now + kWatchdogPeriod;
    std::vector<ExecutionPtr> overdue;
    for (const auto& e : running_) {
      if (e->answered) continue;
      // Whether the watchdog still looks out for this call's clients and deadlines.
      bool watch_clients = !e->no_one_waits && e->model->executable().interruptible();
      if (now >= e->interrupt_at) {
        overdue.push_back(e);
        e->interrupt_at = now + options_.reinterrupt_interval;
      } else if (watch_clients && NoOneWaits(*e, now) && StreamGraceOver(*e, now)) {
        // Every client left or gave up at its deadline: free the interpreter
        // for requests that still have one, as the execution limit would, but
        // now. Fired again every reinterrupt_interval, as an overdue one: a
        // call that has not armed its hook yet, or that caught the exception,
        // still ends.
        e->no_one_waits = true;
        watch_clients = false;
        e->interrupt_at = now + options_.reinterrupt_interval;
        overdue.push_back(e);
      }
      wake = std::min(wake, e->interrupt_at);
      if (watch_clients) wake = std::min(wake, e->deadline);
    }
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> expired;
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, Scheduler::ClosedSequence>> idle;
    for (const auto& model : models_) {
      std::vector<RequestPtr> gone;
      model->scheduler_->Expire(now, &gone, &wake);
      for (auto& r : gone) expired.emplace_back(model, std::move(r));
      std::vector<Scheduler::ClosedSequence> closed;
      model->scheduler_->CloseIdle(now, &closed, &wake);
      for (auto& c : closed) {
        if (c.bound) slot_drops_[c.slot].push_back({model, c.key});
        idle.emplace_back(model, std::move(c));
      }
    }
    if (!idle.empty()) work_cv_.notify_all();  // the slots' workers drop the states
    if (!overdue.empty() || !expired.empty() || !idle.empty()) {
      lock.unlock();
      for (auto& [model, c] : idle) LogSequenceTimedOut(*model, c);
      idle.clear();
      for (auto& e : overdue) e->hook.Fire();  // asynchronous: takes no GIL here
      for (auto& [model, r] : expired) Expire(*model, std::move(r));
      lock.lock();
      for (auto& [model, r] : expired) LeaveIfDrained(model);
      continue;
    }
    watchdog_wake_ = wake;
    watchdog_cv_.wait_until(lock, wake);
    watchdog_wake_ = Clock::time_point::min();  // awake: Submit need not notify
  }
}

bool Dispatcher::Drain(Clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  work_cv_.notify_all();
  return idle_cv_.wait_until(lock, deadline, [this] { return IdleLocked(); });
}

bool Dispatcher::IdleLocked() const {
  return running_.empty() && std::all_of(models_.begin(), models_.end(), [](auto& m) {
           return m->scheduler_->queued() == 0;
         });
}

size_t Dispatcher::Abandon() {
  std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> queued;
  std::vector<ExecutionPtr> stuck;
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    for (auto& model : models_) {
      for (auto& r : model->scheduler_->TakeAll()) queued.emplace_back(model, std::move(r));
    }
    for (const auto& e : running_) {
      if (e->answered) continue;
      e->answered = true;
      stuck.push_back(e);
    }
  }
  Status gone = Unavailable("the server shut down before the request could finish");
  for (auto& [model, r] : queued) FinishRequest(*model, std::move(r), gone, {}, 0);
  for (auto& e : stuck) {
    Status status = Unavailable("model '" + e->model->manifest().name +
                                "' was still running the request when the server shut down");
    // The worker may still read the inputs: the requests stay with it.
    for (auto& r : e->requests) FinishAbandoned(*e->model, *r, status);
  }
  return stuck.size();
}

size_t Dispatcher::queued(const DispatchedModel& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  return model.scheduler_->queued();
}

std::vector<Dispatcher::ModelLoad> Dispatcher::Loads() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ModelLoad> out;
  for (const auto& model : models_) {
    out.push_back({model->manifest().name, model->manifest().version,
                   model->scheduler_->queued(), model->running_});
  }
  return out;
}

}  // namespace manypy
