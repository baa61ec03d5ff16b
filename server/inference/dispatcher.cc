// Dispatcher's queueing half: models added and retired, requests submitted,
// workers finding their next execution fairly, the watchdog, slots held for
// loads, drain and abandon at shutdown. Running is dispatcher_execute.cc.
#include "server/inference/dispatcher.h"

#include <algorithm>
#include <utility>

#include "common/thread_name.h"
#include "server/inference/execution_outcome.h"

namespace manypy {

Dispatcher::Dispatcher(Options options) : options_(options), slots_(options.slots) {
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
    MutexLock lock(mu_);
    stopping_ = draining_ = true;
    for (auto& model : models_) {
      for (auto& r : model->scheduler_->TakeAll()) left.emplace_back(model, std::move(r));
    }
  }
  for (auto& [model, r] : left) {
    FinishRequest(*model, std::move(r), Unavailable("the server is shutting down"), {}, 0);
  }
  work_cv_.notify_all();
  {
    MutexLock lock(mu_);
    slots_.WakeAll();
  }
  watchdog_cv_.notify_all();
  for (auto& w : workers_) w.join();
  watchdog_.join();
}

void Dispatcher::Add(std::shared_ptr<DispatchedModel> model) {
  MutexLock lock(mu_);
  models_.push_back(std::move(model));
}

void Dispatcher::Retire(const std::shared_ptr<DispatchedModel>& model, std::function<void()> on_drained) {
  MutexLock lock(mu_);
  model->retired_ = true;
  model->on_drained_ = std::move(on_drained);
  LeaveIfDrained(model);
}

bool Dispatcher::TEST_Drained(const DispatchedModel& model) const {
  MutexLock lock(mu_);
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
  return Hand(model, std::move(request), wake_worker ? Then::kWakeWorker : Then::kNothing);
}

RequestPtr Dispatcher::SubmitOrRunHere(const std::shared_ptr<DispatchedModel>& model,
                                       RequestPtr request) {
  return Hand(model, std::move(request), Then::kRunHere);
}

RequestPtr Dispatcher::Hand(const std::shared_ptr<DispatchedModel>& model, RequestPtr request,
                            Then then) {
  Status status;
  bool wake = false;
  {
    MutexLock lock(mu_);
    if (draining_) {
      status = Unavailable("the server is shutting down");
    } else if (model->left_) {  // a handle taken before the swap, used after the drain
      return request;
    } else {
      Clock::time_point deadline = request->deadline;
      status = model->scheduler_->Enqueue(&request);
      if (status.ok() && deadline < watchdog_wake_) watchdog_cv_.notify_one();
    }
    if (status.ok() && then == Then::kRunHere) {
      if (std::optional<size_t> slot = SlotToRunHere(*model); slot.has_value()) {
        RunHere(*slot);
        return nullptr;
      }
      then = Then::kWakeWorker;
    }
    // Only a worker that waits on a free slot can start it: one whose slot is
    // busy, held or lent looks for work itself when that ends.
    wake = then == Then::kWakeWorker && slots_.AnyIdle();
  }
  if (!status.ok()) {
    FinishRequest(*model, std::move(request), status, {}, 0);
    return nullptr;
  }
  // A request pinned to one slot (a sequence's) needs that slot's worker:
  // any one woken might be another's.
  if (model->scheduler_->pins_slots()) {
    work_cv_.notify_all();
  } else if (wake) {
    work_cv_.notify_one();
  }
  return nullptr;
}

ExecutionPtr Dispatcher::FindWork(
    size_t slot, Clock::time_point now, Clock::time_point* wake,
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>>* expired, bool lent) {
  // Round robin from the model after the last one served: a hot model cannot
  // starve a cold one.
  for (size_t n = 0; n < models_.size(); ++n) {
    size_t index = (cursor_ + n) % models_.size();
    const std::shared_ptr<DispatchedModel>& model = models_[index];
    if (model->running_ >= model->limits().instance_count) continue;
    // A lent slot's turn ends at work only a worker may run: it is not passed over.
    if (lent && model->scheduler_->queued() > 0 && !RunsHere(*model)) return nullptr;
    std::vector<RequestPtr> gone;
    Clock::time_point ignored = Clock::time_point::max();
    model->scheduler_->Expire(now, &gone, &ignored);
    for (auto& r : gone) expired->emplace_back(model, std::move(r));
    std::vector<RequestPtr> batch = model->scheduler_->Next(slot, now, model->running_ == 0, wake);
    if (batch.empty()) continue;
    cursor_ = (index + 1) % models_.size();
    return NewExecution(model, std::move(batch));
  }
  return nullptr;
}

void Dispatcher::Work(size_t slot) {
  MutexLock lock(mu_);
  for (;;) {
    if (slots_.unavailable(slot)) {  // held by a RunOnSlot, or lent to SubmitOrRunHere
      if (stopping_) return;
      // A Submit may have woken this worker rather than a free one: pass it on.
      work_cv_.notify_one();
      slots_.WaitForChange(lock);
      continue;
    }
    if (slots_.has_drops(slot) && !stopping_) {  // at shutdown they go with the models
      DropStates(slot, slots_.TakeDrops(slot));
      continue;
    }
    Clock::time_point now = Clock::now();
    Clock::time_point wake = Clock::time_point::max();
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> expired;
    ExecutionPtr execution = FindWork(slot, now, &wake, &expired);
    if (!expired.empty()) {
      lock.Unlock();
      for (auto& [model, r] : expired) Expire(*model, std::move(r));
      lock.Lock();
      for (auto& [model, r] : expired) LeaveIfDrained(model);
      if (execution == nullptr) continue;
    }
    if (execution == nullptr) {
      if (stopping_) return;
      if (draining_ && IdleLocked()) idle_cv_.notify_all();
      slots_.SetWaiting(slot, true);  // SubmitOrRunHere may lend the slot meanwhile
      if (wake == Clock::time_point::max()) {
        work_cv_.wait(lock.native());
      } else {
        work_cv_.wait_until(lock.native(), wake);
      }
      slots_.SetWaiting(slot, false);
      continue;
    }
    Execute(slot, execution);
  }
}

void Dispatcher::DropStates(size_t slot, std::vector<SlotTable::StateDrop> drops) {
  bool was_executing = slots_.BeginExecuting(slot);  // RunOnSlot waits for it, as for a call
  mu_.Unlock();
  for (const auto& d : drops) d.model->executable().DropSequenceStates(slot, {d.key});
  drops.clear();  // the models' last references may go here, outside mu_
  mu_.Lock();
  slots_.EndExecuting(slot, was_executing);
}

void Dispatcher::RunOnSlot(size_t slot, const std::function<void()>& work) {
  {
    MutexLock lock(mu_);
    slots_.Hold(slot, lock);
  }
  struct GiveBack {
    Dispatcher* d;
    size_t slot;
    ~GiveBack() {
      {
        MutexLock lock(d->mu_);
        d->slots_.GiveBack(slot);
      }
      d->work_cv_.notify_all();  // requests may have queued while the slot was held
    }
  } give_back{this, slot};
  work();
}

bool Dispatcher::TEST_SlotHeld(size_t slot) const {
  MutexLock lock(mu_);
  return slots_.held(slot);
}

void Dispatcher::Expire(const DispatchedModel& model, RequestPtr request) {
  Status why = ExpiredStatus(model, *request, Clock::now());
  FinishRequest(model, std::move(request), std::move(why), {}, 0);
}

void Dispatcher::Watch() {
  WatchdogTimes times;
  times.reinterrupt_interval = options_.reinterrupt_interval;
  MutexLock lock(mu_);
  while (!stopping_) {
    Clock::time_point now = Clock::now();
    WatchdogLook look = LookForOverdue(running_, now, times);
    std::vector<ExecutionPtr>& overdue = look.overdue;
    Clock::time_point& wake = look.wake;
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> expired;
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, Scheduler::ClosedSequence>> idle;
    for (const auto& model : models_) {
      std::vector<RequestPtr> gone;
      model->scheduler_->Expire(now, &gone, &wake);
      for (auto& r : gone) expired.emplace_back(model, std::move(r));
      std::vector<Scheduler::ClosedSequence> closed;
      model->scheduler_->CloseIdle(now, &closed, &wake);
      for (auto& c : closed) {
        if (c.bound) slots_.AddDrop(c.slot, {model, c.key});
        idle.emplace_back(model, std::move(c));
      }
    }
    if (!idle.empty()) work_cv_.notify_all();  // the slots' workers drop the states
    if (!overdue.empty() || !expired.empty() || !idle.empty()) {
      lock.Unlock();
      for (auto& [model, c] : idle) LogSequenceTimedOut(*model, c);
      idle.clear();
      for (auto& e : overdue) e->hook.Fire();  // asynchronous: takes no GIL here
      for (auto& [model, r] : expired) Expire(*model, std::move(r));
      lock.Lock();
      for (auto& [model, r] : expired) LeaveIfDrained(model);
      continue;
    }
    watchdog_wake_ = wake;
    watchdog_cv_.wait_until(lock.native(), wake);
    watchdog_wake_ = Clock::time_point::min();  // awake: Submit need not notify
  }
}

bool Dispatcher::Drain(Clock::time_point deadline) {
  MutexLock lock(mu_);
  draining_ = true;
  work_cv_.notify_all();
  return idle_cv_.wait_until(lock.native(), deadline,
                             [this]() REQUIRES(mu_) { return IdleLocked(); });
}

bool Dispatcher::IdleLocked() const { return running_.empty() && !QueuedMoreThan(0); }

bool Dispatcher::QueuedMoreThan(size_t n) const {
  size_t queued = 0;
  for (const auto& m : models_) {
    queued += m->scheduler_->queued();
    if (queued > n) return true;
  }
  return false;
}

size_t Dispatcher::Abandon() {
  std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>> queued;
  std::vector<ExecutionPtr> stuck;
  {
    MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  return model.scheduler_->queued();
}

std::vector<Dispatcher::ModelLoad> Dispatcher::Loads() const {
  MutexLock lock(mu_);
  std::vector<ModelLoad> out;
  for (const auto& model : models_) {
    size_t streams = 0;
    for (const auto& e : running_) {
      if (e->model == model && e->streaming) streams += e->requests.size();
    }
    out.push_back({model->manifest().name, model->manifest().version,
                   model->scheduler_->queued(), model->running_, streams});
  }
  return out;
}

}  // namespace manypy
