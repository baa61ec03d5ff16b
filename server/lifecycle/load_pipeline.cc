#include "server/lifecycle/load_pipeline.h"

#include "server/crash/running_calls.h"
#include "server/lifecycle/quarantine.h"

#include <algorithm>
#include <thread>

#include "server/inference/batching_scheduler.h"
#include "server/inference/inference_observer.h"
#include "server/inference/sequence_scheduler.h"
#include "server/lifecycle/reload_policy.h"
#include "server/lifecycle/warmup.h"
#include "server/log.h"

namespace manypy {
namespace {

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<Scheduler> SchedulerFor(const Manifest& m, const ModelSettings& settings) {
  if (settings.sequences.enabled) {
    return std::make_unique<SequenceScheduler>(m.name, settings.max_queue_size, settings.sequences);
  }
  if (settings.batching.dynamic) {
    return std::make_unique<BatchingScheduler>(m.name, settings.max_queue_size, m.max_batch_size,
                                               settings.batching);
  }
  return std::make_unique<FifoScheduler>(m.name, settings.max_queue_size);
}

// Loads (`load`) and/or warms up (`warm`) `slot`, in one hold of it; adds the
// time taken to `times`.
Status PrepareAndWarmUp(Executable& executable, const Manifest& m, size_t slot, int64_t warmup_runs,
                        bool load, bool warm, LoadTimes* times) {
  Status status;
  if (load) {
    const Clock::time_point start = Clock::now();
    status = executable.Prepare(slot);
    times->load_seconds += SecondsSince(start);
  }
  if (warm && status.ok()) {
    const Clock::time_point start = Clock::now();
    status = WarmUp(executable, m, slot, warmup_runs);
    times->warmup_seconds += SecondsSince(start);
  }
  return status;
}

}  // namespace

Status LoadPipeline::Load(const std::string& name) {
  ModelRegistry& registry = *context_.registry;
  auto entry = context_.repository->Latest(name);
  if (!entry.ok()) {
    MANYPY_RETURN_IF_ERROR(registry.NotInRepository(name, entry.status()));
    return entry.status();
  }
  VersionPtr serving;  // a reloading model keeps serving it meanwhile
  {
    MutexLock lock(registry.mu());
    serving = registry.ServingLocked(name);
  }
  VersionPtr wanted = registry.BeginLoad(name, entry->version);
  Status result = Status::Ok();
  for (;;) {
    ReloadStep step = AvailabilityPreservingNextStep(serving ? &serving->lifecycle : nullptr,
                                                     &wanted->lifecycle);
    if (step == ReloadStep::kDone) break;
    if (step == ReloadStep::kDrainOld) {
      MutexLock lock(registry.mu());
      // Drains, then unloads.
      MANYPY_RETURN_IF_ERROR(context_.retirer->RetireLocked(serving, "", *context_.replaced));
      continue;
    }
    // kLoadNew. Loading runs Python in every interpreter: never under a lock.
    const Clock::time_point start = Clock::now();
    const int64_t estimate = context_.budget->EstimateBytes(*entry);
    StatusOr<std::shared_ptr<Model>> loaded = Internal("not loaded");
    // A quarantined model is refused before anything is evicted for it.
    Status room = context_.quarantine != nullptr ? context_.quarantine->Admit(name, entry->version)
                                                 : Status::Ok();
    if (room.ok()) room = context_.budget->MakeRoom(name, estimate, *executor_.evictions);
    loaded = room.ok() ? LoadVersion(*entry) : room;
    if (!loaded.ok()) {
      result = loaded.status();
      MANYPY_RETURN_IF_ERROR(registry.Failed(wanted, result));
      Log(LogLevel::kWarning, "model " + name + " version " + std::to_string(entry->version) +
                                  " failed to load after " + FormatSecondsFixed(SecondsSince(start)) +
                                  " s: " + result.message());
      // A refusal by the budget is not the model failing (no load-failure
      // count, no ManypyModelLoadFailed alert): the index and the answer say it.
      InferenceObserver* observer = GetInferenceObserver();
      if (observer != nullptr && result.code() != StatusCode::kResourceExhausted) {
        observer->OnModelLoadFailed(name, entry->version, result);
      }
      continue;
    }
    std::shared_ptr<Model> model = std::move(*loaded);
    // An executable that measures nothing (TorchScript) counts as estimated.
    const int64_t bytes = model->memory().total() > 0 ? model->memory().total() : estimate;
    // New handles get the new version from here on; its request uses it now.
    MANYPY_RETURN_IF_ERROR(registry.Serve(wanted, std::move(model), bytes,
                                          executor_.for_request ? context_.next_use() : 0));
  }
  // Its first load could only estimate what its Python holds; now measured.
  if (result.ok()) context_.budget->FitAfterLoad(name, *executor_.evictions);
  return result;
}

StatusOr<std::shared_ptr<Model>> LoadPipeline::LoadVersion(const RepositoryEntry& entry) {
  // A crash while it loads (unpickling, warm-up) is blamed on it (server/crash/).
  ScopedLoadingModel loading(entry.name, entry.version);
  Clock::time_point start = Clock::now();
  Manifest m;
  auto loaded = context_.loader(entry.path, &m);
  if (!loaded.ok()) return loaded.status();
  std::shared_ptr<Executable> executable = std::move(*loaded);
  auto settings = ResolveModelSettings(m, context_.serving, context_.slots);
  if (!settings.ok()) return settings.status();
  LoadTimes times;
  times.load_seconds = SecondsSince(start);
  Status prepared = PrepareEverySlot(*executable, m, settings->warmup_runs, &times);
  if (!prepared.ok()) {
    RunSlotWork([&] { context_.retirer->ReleaseEverySlot(*executable); });
    return prepared;
  }
  ModelLimits limits{settings->instance_count, settings->max_execution, settings->sequences};
  auto queue = std::make_shared<DispatchedModel>(m, limits, SchedulerFor(m, *settings), executable,
                                                 context_.stats->For(m.name, m.version));
  context_.dispatcher->Add(queue);
  Log(LogLevel::kInfo, "model " + m.name + " version " + std::to_string(m.version) + " loaded from " +
                           entry.path + " in " + FormatSecondsFixed(times.load_seconds) + " s, warm-up " +
                           std::to_string(settings->warmup_runs) + " run(s) per instance in " +
                           FormatSecondsFixed(times.warmup_seconds) + " s; " +
                           std::to_string(settings->instance_count) + " instance(s)" +
                           (settings->batching.dynamic ? ", dynamic batching" : "") +
                           (settings->sequences.enabled ? ", stateful sequences" : ""));
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelLoaded(m.name, m.version, times.load_seconds, times.warmup_seconds);
    MemoryFootprint memory = executable->Memory();
    observer->OnModelMemory(m.name, m.version, memory.shared_bytes, memory.slot_total());
  }
  ResponseCache* cache = settings->response_cache ? context_.response_cache : nullptr;
  if (settings->response_cache && cache == nullptr) {
    Log(LogLevel::kWarning, "model " + m.name + " asks for the response cache, but the server "
                            "has none (--response-cache-bytes): its responses are not cached");
  }
  auto leases = context_.lease_events != nullptr
                    ? std::make_shared<VersionLeases>(context_.lease_events)
                    : nullptr;
  return std::make_shared<Model>(entry.path, std::move(*settings), times, executable->Memory(),
                                 std::move(queue), context_.dispatcher, cache, std::move(leases));
}

void LoadPipeline::RunSlotWork(const std::function<void()>& work) {
  if (executor_.slot_work == nullptr) {
    work();
  } else {
    executor_.slot_work->Run(work);
  }
}

Status LoadPipeline::PrepareEverySlot(Executable& executable, const Manifest& m,
                                      int64_t warmup_runs, LoadTimes* times) {
  if (!executor_.every_slot_at_once) return PrepareSlotBySlot(executable, m, warmup_runs, times);
  // A torch.compile'd model's slots compile at once too: Inductor compiles
  // each kernel once under a file lock in the cache the interpreters share,
  // so the others wait for it and load it (measured with 2 interpreters:
  // ready 1.13x one interpreter's, against 1.32x with the first slot's
  // warm-up before the others', whose restarts were slower still).
  std::vector<Status> results(context_.slots);
  std::vector<LoadTimes> slot_times(context_.slots);
  std::vector<std::thread> threads;
  for (size_t slot = 0; slot < context_.slots; ++slot) {
    threads.emplace_back([&, slot] {
      context_.dispatcher->RunOnSlot(slot, [&] {
        results[slot] = PrepareAndWarmUp(executable, m, slot, warmup_runs, true, true, &slot_times[slot]);
      });
    });
  }
  for (auto& t : threads) t.join();
  double load = 0, warmup = 0;
  for (size_t slot = 0; slot < context_.slots; ++slot) {
    if (!results[slot].ok()) return results[slot];
    load = std::max(load, slot_times[slot].load_seconds);
    warmup = std::max(warmup, slot_times[slot].warmup_seconds);
  }
  times->load_seconds += load;
  times->warmup_seconds += warmup;
  return Status::Ok();
}

Status LoadPipeline::PrepareSlotBySlot(Executable& executable, const Manifest& m,
                                       int64_t warmup_runs, LoadTimes* times) {
  // Once requests may come, one interpreter at a time (the others keep
  // answering: loading every interpreter at once stalled every model for the
  // length of the load, make soak's p99) and, unless a request waits for it,
  // on the background thread (the load's CPU must not delay the requests).
  for (size_t slot = 0; slot < context_.slots; ++slot) {
    // Under a budget, room for what the first interpreter measured is made
    // between its load and its warm-up: the weights' pages are resident
    // only from their first read, so the load's resident size stays within
    // the budget (made after the warm-up, a model's first load passed it by
    // that interpreter's Python heap until the eviction). The slot is let
    // go meanwhile, since what is evicted unloads on every slot; so only
    // then, as each let-go lets a queued request run in between.
    const bool reserve = slot == 0 && context_.slots > 1 && context_.budget->limits().enabled();
    Status status;
    RunSlotWork([&] {
      context_.dispatcher->RunOnSlot(slot, [&] {
        status = PrepareAndWarmUp(executable, m, slot, warmup_runs, true, !reserve, times);
      });
    });
    if (reserve && status.ok()) {
      MANYPY_RETURN_IF_ERROR(context_.budget->ReserveMeasured(executable, m.name, *executor_.evictions));
      RunSlotWork([&] {
        context_.dispatcher->RunOnSlot(slot, [&] {
          status = PrepareAndWarmUp(executable, m, slot, warmup_runs, false, true, times);
        });
      });
    }
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

}  // namespace manypy
