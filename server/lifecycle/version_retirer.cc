#include "server/lifecycle/version_retirer.h"

#include "server/inference/inference_observer.h"
#include "server/lifecycle/memory_release.h"
#include "server/log.h"

namespace manypy {

VersionRetirer::VersionRetirer(ModelRegistry* registry, Dispatcher* dispatcher, size_t slots,
                               std::shared_ptr<LeaseEvents> events)
    : registry_(registry), dispatcher_(dispatcher), slots_(slots), events_(std::move(events)) {
  guard_->retirer = this;
}

Status VersionRetirer::RetireLocked(const VersionPtr& version, const std::string& reason,
                                    BackgroundThread& unloader) {
  registry_->mu().AssertHeld();
  MANYPY_RETURN_IF_ERROR(registry_->StopServingLocked(version, reason));
  const std::shared_ptr<Model>& model = version->model;
  Log(LogLevel::kInfo, "model " + model->name() + " version " + std::to_string(model->version()) +
                           " retired: takes no new requests, unloads once drained (" +
                           std::to_string(model->queued()) + " queued)");
  if (InferenceObserver* observer = GetInferenceObserver()) {
    observer->OnModelRetired(model->name(), model->version());
  }
  // Its cached answers go now; the requests it still runs store none.
  model->DropCachedResponses();
  // Called under the dispatcher's lock as the version leaves: only hands the
  // unload on (the registry's mutex comes before the dispatcher's).
  dispatcher_->Retire(model->queue(), [guard = guard_, version, unloader = &unloader] {
    MutexLock lock(guard->mu);
    if (guard->retirer == nullptr) return;  // shutting down: left to the process's exit
    VersionRetirer* retirer = guard->retirer;
    unloader->Post([retirer, version] { retirer->UnloadDrained(version); });
  });
  return Status::Ok();
}

void VersionRetirer::ReleaseEverySlot(Executable& executable) {
  for (size_t slot = 0; slot < slots_; ++slot) {
    dispatcher_->RunOnSlot(slot, [&] { executable.Release(slot); });
  }
}

void VersionRetirer::UnloadDrained(const VersionPtr& version) {
  // A refused transition is a bug the lifecycle has logged: the version is left as it is.
  StatusOr<std::shared_ptr<Model>> unloading = registry_->StartUnload(version);
  if (!unloading.ok()) return;
  std::shared_ptr<Model> model = std::move(*unloading);
  std::string what = model->name() + " version " + std::to_string(model->version());
  Clock::time_point start = Clock::now();
  ReleaseEverySlot(model->queue()->executable());
  // Drained: only handles taken before it left remain, and Submit gives
  // their requests back; the executable goes with the last of them.
  model.reset();
  if (!registry_->FinishUnload(version).ok()) return;
  // What the allocator freed goes back to the system now, not whenever it
  // gets round to it: evictions make room for the next load (memory_release.h).
  ReturnFreeMemoryToSystem();
  events_->Notify();  // a load waiting for this memory plans again
  Log(LogLevel::kInfo, "model " + what + " unloaded in " +
                           FormatSecondsFixed(std::chrono::duration<double>(Clock::now() - start).count()) + " s");
}

void VersionRetirer::Stop() {
  MutexLock lock(guard_->mu);
  guard_->retirer = nullptr;  // no unload is posted from now on
}

void VersionRetirer::LeaveStuckVersions() {
  MutexLock lock(registry_->mu());
  for (const auto& v : registry_->RetiringLocked()) {
    if (v->lifecycle.state() == VersionState::kDraining && v->model != nullptr) {
      Log(LogLevel::kWarning, "model " + v->model->name() + " is still running a call; not unloaded");
      new std::shared_ptr<Model>(std::move(v->model));  // NOLINT: its interpreter is busy; leave it be
    }
  }
}

}  // namespace manypy
