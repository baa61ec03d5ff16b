// Dispatcher's prefill apart from the running batch (disaggregated prefill,
// as DistServe and Splitwise split prefill from decode, here between the
// interpreters of one process): a free worker prefills a request of a model
// whose batch runs on another slot, sends its first response, and hands the
// model's portable state to the batch, which adopts it at its next step
// boundary (dispatcher_batch.cc). Why: a joiner of the running batch waits
// for the step in progress, then for a step that also prefills it; apart, it
// waits for neither (docs/continuous-batching.md, "Prefill apart").
#include <algorithm>
#include <utility>

#include "server/inference/dispatcher.h"
#include "server/inference/execution_outcome.h"
#include "server/inference/inference_observer.h"

namespace manypy {

ExecutionPtr Dispatcher::PrefillWork(
    size_t slot, const std::shared_ptr<DispatchedModel>& model, Clock::time_point now,
    Clock::time_point* wake,
    std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>>* expired) {
  Executable& executable = model->executable();
  if (!executable.prefills_apart() || model->left_ || model->scheduler_->queued() == 0) {
    return nullptr;
  }
  // Only as many as the running batches can take: a request prefilled for a
  // full batch would wait there, its first token sent, its second not.
  size_t taken = model->prefilling_;
  size_t batches = 0;
  for (const Execution* b : model->batches_) {
    if (b->answered || b->no_one_waits) continue;
    taken += b->requests.size();
    ++batches;
  }
  if (batches == 0 || taken >= batches * executable.continuous_batching()) return nullptr;
  std::vector<RequestPtr> gone;
  Clock::time_point ignored = Clock::time_point::max();
  model->scheduler_->Expire(now, &gone, &ignored);
  for (auto& r : gone) expired->emplace_back(model, std::move(r));
  std::vector<RequestPtr> next = model->scheduler_->Next(slot, now, false, wake);
  if (next.empty()) return nullptr;
  ExecutionPtr execution = NewExecution(model, std::move(next));
  execution->prefill = true;
  model->prefilling_ += execution->requests.size();
  return execution;
}

Execution* Dispatcher::BatchToAdopt(const DispatchedModel& model) {
  Execution* best = nullptr;
  for (Execution* b : model.batches_) {
    // An answered batch (Abandon) or one no one waits for (about to be
    // interrupted) would fail the request with them.
    if (b->answered || b->no_one_waits) continue;
    if (best == nullptr || b->requests.size() < best->requests.size()) best = b;
  }
  return best;
}

void Dispatcher::RunPrefill(size_t slot, Execution& execution) {
  DispatchedModel& model = *execution.model;
  const Manifest& m = model.manifest();
  Executable& executable = model.executable();
  const std::chrono::microseconds limit = model.limits().max_execution;
  InferenceObserver* observer = GetInferenceObserver();
  std::vector<std::pair<InferenceRequest*, Status>> ending;    // they end here
  std::vector<std::pair<InferenceRequest*, Value>> prefilled;  // for a batch
  for (const RequestPtr& request : execution.requests) {
    InferenceRequest* r = request.get();
    Clock::time_point started = Clock::now();
    r->times.started = started;
    if (observer != nullptr) observer->OnExecutionStarted(m.name, m.version, slot);
    std::string error_type;
    StatusOr<Prefilled> p =
        execution.hook.fired()
            ? StatusOr<Prefilled>(Internal("interrupted"))
            : executable.PrefillBatchedStream(slot, r->inputs, &execution.hook, &error_type);
    Clock::time_point computed = Clock::now();
    bool interrupted = execution.hook.fired();
    if (interrupted) error_type.clear();  // our interrupt, not the model's exception
    // A prefill is one execution of one row: it advanced one stream by its
    // first response, as a step of that stream alone would (so
    // manypy_batch_size still counts the streams each execution advanced,
    // and every response is counted once).
    RecordExecution(model, slot, 1, started, computed, error_type);
    if (interrupted) {
      bool no_one_waits = false;
      {
        MutexLock lock(mu_);
        no_one_waits = execution.no_one_waits;
      }
      auto ran = std::chrono::duration_cast<std::chrono::microseconds>(computed - started);
      ending.emplace_back(r, InterruptedStatus(execution, *r, no_one_waits, ran, Clock::now()));
      continue;
    }
    if (!p.ok()) {
      ending.emplace_back(r, p.status());
      continue;
    }
    {
      // Sending is the client's time, not the model's.
      MutexLock lock(mu_);
      execution.interrupt_at = Clock::time_point::max();
    }
    Status sent = Status::Ok();
    if (p->first.responded) {
      sent = r->stream ? r->stream(p->first.outputs, limit)
                       : Internal("model '" + m.name + "' streams, but its request has no stream");
    }
    if (!sent.ok()) {
      ending.emplace_back(r, std::move(sent));
    } else if (p->first.finished) {
      ending.emplace_back(r, Status::Ok());
    } else if (Clock::now() >= r->client_deadline) {
      ending.emplace_back(r, DeadlineExceeded("the deadline of the stream of model '" + m.name +
                                              "' passed after its prefill"));
    } else if (r->ClientLeft()) {
      ending.emplace_back(r, Cancelled("the client left its stream of model '" + m.name +
                                       "' after its prefill"));
    } else {
      prefilled.emplace_back(r, std::move(p->state));
    }
  }

  std::vector<RequestPtr> out;
  bool become_batch = false;
  {
    MutexLock lock(mu_);
    model.prefilling_ -= execution.requests.size();
    if (execution.answered) return;  // Abandon answered them, and may still read them
    std::vector<InferenceRequest*> which;
    for (const auto& e : ending) which.push_back(e.first);
    out = LeaveBatch(execution, which);
    if (!prefilled.empty()) {
      if (Execution* batch = BatchToAdopt(model); batch != nullptr) {
        for (auto& [r, state] : prefilled) {
          auto it = std::find_if(execution.requests.begin(), execution.requests.end(),
                                 [r = r](const RequestPtr& q) { return q.get() == r; });
          batch->deadline = std::max(batch->deadline, r->client_deadline);
          batch->requests.push_back(std::move(*it));
          execution.requests.erase(it);
          batch->adopting.emplace_back(r, std::move(state));
        }
        if (batch->deadline < watchdog_wake_) watchdog_cv_.notify_one();
      } else {
        // The batch ended meanwhile: this execution is the model's batch now.
        execution.adopting = std::move(prefilled);
        execution.prefill = false;
        become_batch = true;
      }
    }
  }
  Clock::time_point now = Clock::now();
  for (size_t i = 0; i < out.size(); ++i) {
    out[i]->times.computed = now;
    int64_t rows = out[i]->batch_rows;
    FinishRequest(model, std::move(out[i]), ending[i].second, {}, rows);
  }
  if (become_batch) RunBatch(slot, execution);
}

}  // namespace manypy
