// Dispatcher's running batch: continuous (iteration-level) batching of a
// streaming model on one slot. Requests join at step boundaries and leave at
// them, each alone; one step advances every request by one response. The
// queueing half is dispatcher.cc, ordinary runs dispatcher_execute.cc.
#include <algorithm>
#include <utility>

#include "server/inference/dispatcher.h"
#include "server/inference/execution_outcome.h"
#include "server/inference/inference_observer.h"

namespace manypy {
namespace {

using Expired = std::vector<std::pair<std::shared_ptr<DispatchedModel>, RequestPtr>>;
using Leaving = std::vector<std::pair<InferenceRequest*, Status>>;

// A request in the running batch whose state the model's start() made.
struct Member {
  InferenceRequest* request;
  uint64_t key;
};

// Why a request that stays in the batch must leave at this boundary (its
// client left, its deadline passed); OK when it stays.
Status GoneStatus(const DispatchedModel& model, const InferenceRequest& r, Clock::time_point now) {
  const std::string& name = model.manifest().name;
  if (now >= r.client_deadline) {
    return DeadlineExceeded("the deadline of the stream of model '" + name +
                            "' passed; it left the running batch");
  }
  if (r.ClientLeft()) {
    return Cancelled("the client left its stream of model '" + name +
                     "'; it left the running batch");
  }
  return Status::Ok();
}

// Hands each response of a step to its stream, in the states' order; returns
// the requests that leave now, each with its status (OK: it finished).
Leaving AnswerStep(const DispatchedModel& model, const std::vector<Member>& stepping,
                   StatusOr<std::vector<StreamStep>>& steps, std::chrono::microseconds limit) {
  Leaving leaving;
  if (!steps.ok()) {
    // The model could not say whose state failed: every request of the step.
    for (const Member& x : stepping) leaving.emplace_back(x.request, steps.status());
    return leaving;
  }
  for (size_t i = 0; i < steps->size(); ++i) {
    StreamStep& step = (*steps)[i];
    InferenceRequest* r = stepping[i].request;
    if (!step.error.ok()) {
      leaving.emplace_back(r, std::move(step.error));
      continue;
    }
    Status sent = Status::Ok();
    if (step.responded) {
      sent = r->stream ? r->stream(step.outputs, limit)
                       : Internal("model '" + model.manifest().name +
                                  "' streams, but its request has no stream");
    }
    if (!sent.ok()) {
      leaving.emplace_back(r, std::move(sent));
    } else if (step.finished) {
      leaving.emplace_back(r, Status::Ok());
    } else if (Status gone = GoneStatus(model, *r, Clock::now()); !gone.ok()) {
      leaving.emplace_back(r, std::move(gone));
    }
  }
  return leaving;
}

}  // namespace

std::vector<InferenceRequest*> Dispatcher::JoinBatch(size_t slot, Execution& execution, size_t room,
                                                     Expired* expired) {
  DispatchedModel& model = *execution.model;
  Clock::time_point now = Clock::now();
  std::vector<RequestPtr> gone;
  Clock::time_point ignored = Clock::time_point::max();
  model.scheduler_->Expire(now, &gone, &ignored);
  for (auto& r : gone) expired->emplace_back(execution.model, std::move(r));
  std::vector<InferenceRequest*> joined;
  while (joined.size() < room) {
    Clock::time_point wake = Clock::time_point::max();
    std::vector<RequestPtr> next = model.scheduler_->Next(slot, now, false, &wake);
    if (next.empty()) break;
    for (auto& r : next) {
      execution.deadline = std::max(execution.deadline, r->client_deadline);
      joined.push_back(r.get());
      execution.requests.push_back(std::move(r));
    }
  }
  if (!joined.empty() && execution.deadline < watchdog_wake_) watchdog_cv_.notify_one();
  return joined;
}

std::vector<RequestPtr> Dispatcher::LeaveBatch(Execution& execution,
                                               const std::vector<InferenceRequest*>& leaving) {
  std::vector<RequestPtr> out;
  if (execution.answered) return out;  // Abandon answered them, and may still read them
  for (InferenceRequest* r : leaving) {
    auto it = std::find_if(execution.requests.begin(), execution.requests.end(),
                           [r](const RequestPtr& p) { return p.get() == r; });
    out.push_back(std::move(*it));
    execution.requests.erase(it);
  }
  return out;
}

void Dispatcher::RunBatch(size_t slot, Execution& execution) {
  DispatchedModel& model = *execution.model;
  const Manifest& m = model.manifest();
  Executable& executable = model.executable();
  const size_t size = executable.continuous_batching();
  const std::chrono::microseconds limit = model.limits().max_execution;
  InferenceObserver* observer = GetInferenceObserver();
  uint64_t next_key = 0;
  std::vector<Member> members;
  std::vector<InferenceRequest*> joining;
  Expired expired;
  {
    MutexLock lock(mu_);
    for (auto& r : execution.requests) joining.push_back(r.get());
    // Those queued beside the first join its first step.
    if (joining.size() < size) {
      for (InferenceRequest* r : JoinBatch(slot, execution, size - joining.size(), &expired)) {
        joining.push_back(r);
      }
    }
  }
  // The model's time (start, step) is bounded by its execution limit; the
  // readers' time (the sends between steps) is not.
  auto computing = [&](bool on) {
    MutexLock lock(mu_);
    execution.interrupt_at = on && limit.count() > 0 ? Clock::now() + limit : Clock::time_point::max();
    if (execution.interrupt_at < watchdog_wake_) watchdog_cv_.notify_one();
  };
  // Finishes `leaving` (dropping their states first); false when Abandon
  // answered the batch's requests (then nothing more may touch them).
  auto leave = [&](const Leaving& leaving) {
    if (leaving.empty()) return true;
    std::vector<InferenceRequest*> which;
    for (const auto& [r, status] : leaving) which.push_back(r);
    std::vector<RequestPtr> out;
    {
      MutexLock lock(mu_);
      out = LeaveBatch(execution, which);
    }
    if (out.empty()) return false;
    std::vector<uint64_t> keys;
    for (InferenceRequest* r : which) {
      auto it = std::find_if(members.begin(), members.end(), [r](const Member& x) { return x.request == r; });
      if (it == members.end()) continue;  // its start() failed: no state
      keys.push_back(it->key);
      members.erase(it);
    }
    if (!keys.empty()) executable.EndBatchedStreams(slot, keys);
    Clock::time_point now = Clock::now();
    for (size_t i = 0; i < out.size(); ++i) {
      out[i]->times.computed = now;
      int64_t rows = out[i]->batch_rows;
      FinishRequest(model, std::move(out[i]), leaving[i].second, {}, rows);
    }
    return true;
  };

  for (;;) {
    for (auto& [gone_model, r] : expired) Expire(*gone_model, std::move(r));
    expired.clear();
    Clock::time_point started = Clock::now();
    if (observer != nullptr) observer->OnExecutionStarted(m.name, m.version, slot);
    std::string error_type;
    Leaving failed;  // their start() raised: they leave alone
    computing(true);
    for (InferenceRequest* r : joining) {
      r->times.started = Clock::now();
      uint64_t key = next_key++;
      std::string start_error;
      Status joined = executable.StartBatchedStream(slot, key, r->inputs, &execution.hook, &start_error);
      if (execution.hook.fired()) break;
      if (joined.ok()) {
        members.push_back({r, key});
      } else {
        failed.emplace_back(r, std::move(joined));
        if (error_type.empty()) error_type = start_error;
      }
    }
    joining.clear();
    // Every step is everyone's: the requests that joined at this boundary
    // take part in it beside the running ones (a decoder prefills their
    // prompts in the same forward pass as the others' next token: chunked
    // prefill, as vLLM's and Sarathi's schedulers mix them), so their first
    // response comes with the next step and the running ones never wait for
    // a step they are not in. A step of joiners alone first (vLLM's older
    // prefill-first schedule) would cost a decoder whose step packs its
    // prompts about as much as everyone's step (llama_decoder, make
    // bench-decoder-step: 16 joining 4.3 ms, 16 decoding 1.4 ms of CPU), and
    // the running streams that step.
    const std::vector<Member> stepping = members;  // leave() edits members
    std::vector<uint64_t> keys;
    for (const Member& x : stepping) keys.push_back(x.key);
    StatusOr<std::vector<StreamStep>> steps = std::vector<StreamStep>{};
    if (!keys.empty() && !execution.hook.fired()) {
      steps = executable.StepBatchedStreams(slot, keys, &execution.hook, &error_type);
    }
    computing(false);
    Clock::time_point computed = Clock::now();
    bool interrupted = execution.hook.fired();
    if (interrupted) error_type.clear();  // our interrupt, not the model's exception
    // One step is one execution: its rows are the streams it advanced
    // (manypy_batch_size is the batch size per step).
    RecordExecution(model, slot, static_cast<int64_t>(keys.size()), started, computed, error_type);

    if (interrupted) {
      // The execution limit, or every client gone: the whole batch ends
      // (the hook stays fired, so no later step could run).
      bool no_one_waits = false;
      Leaving all;
      {
        MutexLock lock(mu_);
        if (execution.answered) return;
        no_one_waits = execution.no_one_waits;
        auto ran = std::chrono::duration_cast<std::chrono::microseconds>(computed - started);
        for (auto& r : execution.requests) {
          all.emplace_back(r.get(), InterruptedStatus(execution, *r, no_one_waits, ran, Clock::now()));
        }
      }
      leave(all);
      return;
    }
    if (!leave(failed)) return;

    if (!leave(AnswerStep(model, stepping, steps, limit))) return;

    MutexLock lock(mu_);
    if (execution.answered) return;
    // Once the watchdog found no one waiting it may fire the hook: no one
    // new joins this execution (a new one serves them).
    if (!execution.no_one_waits && members.size() < size) {
      joining = JoinBatch(slot, execution, size - members.size(), &expired);
    }
    if (members.empty() && joining.empty()) {
      execution.answered = true;  // every request left: Abandon has nothing to answer
      lock.Unlock();
      for (auto& [gone_model, r] : expired) Expire(*gone_model, std::move(r));
      return;
    }
  }
}

}  // namespace manypy
