// SlotTable: per interpreter slot, whether its worker executes a call there,
// whether it waits for work, whether a RunOnSlot caller holds it or another
// thread runs a call there (run to completion), and the states to drop there.
// The Dispatcher's slots_, GUARDED_BY its mutex: every call holds it (compiler-checked).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "server/inference/dispatched_model.h"

namespace manypy {

class SlotTable {
 public:
  /// A timed-out sequence's state, for the worker of the slot that holds it
  /// to drop in its interpreter (only that worker may enter it).
  struct StateDrop {
    std::shared_ptr<DispatchedModel> model;
    std::string key;
  };

  explicit SlotTable(size_t slots)
      : executing_(slots, false), held_(slots, false), waiting_(slots, false), lent_(slots, false),
        drops_(slots) {}

  size_t size() const { return held_.size(); }
  bool held(size_t slot) const { return held_[slot]; }
  bool executing(size_t slot) const { return executing_[slot]; }
  /// Its worker starts nothing there: a RunOnSlot holds it, or it is lent.
  bool unavailable(size_t slot) const { return held_[slot] || lent_[slot]; }

  /// The worker of `slot` waits for work (true) or looks for it (false).
  void SetWaiting(size_t slot, bool waiting) { waiting_[slot] = waiting; }
  /// A slot another thread may run a call on now: its worker waits for work
  /// (so it is between executions and found none to start), and nothing holds
  /// it, is lent it, or waits to drop a state there.
  bool Idle(size_t slot) const {
    return waiting_[slot] && !executing_[slot] && !held_[slot] && !lent_[slot] &&
           drops_[slot].empty();
  }
  bool AnyIdle() const {
    for (size_t s = 0; s < size(); ++s) {
      if (Idle(s)) return true;
    }
    return false;
  }
  /// Lends an Idle `slot` to the calling thread for one execution: its worker
  /// starts nothing there until Return.
  void Lend(size_t slot) { lent_[slot] = true; }
  /// Gives a lent slot back to its worker (wakes it if it waited for that).
  void Return(size_t slot) {
    lent_[slot] = false;
    changed_.notify_all();
  }

  /// The worker of `slot` starts a call (or drops states) there; returns
  /// whether one ran there already (a nested call runs on its caller's slot),
  /// to hand back to EndExecuting.
  bool BeginExecuting(size_t slot) {
    bool was = executing_[slot];
    executing_[slot] = true;
    return was;
  }
  /// The call ended: wakes a Hold waiting for it.
  void EndExecuting(size_t slot, bool was_executing) {
    executing_[slot] = was_executing;
    changed_.notify_all();
  }

  /// Takes `slot` out of dispatch: waits for another holder to give it back,
  /// marks it held (so its worker starts nothing new: a busy slot must not
  /// keep a load waiting for as long as requests come), then waits for the
  /// call running there to end.
  void Hold(size_t slot, MutexLock& lock) {
    changed_.wait(lock.native(), [&] { return !held_[slot]; });
    held_[slot] = true;
    changed_.wait(lock.native(), [&] { return !executing_[slot]; });
  }
  /// Gives `slot` back to dispatch (the caller then wakes its workers).
  void GiveBack(size_t slot) {
    held_[slot] = false;
    changed_.notify_all();
  }
  /// A worker whose slot is held waits here for a change.
  void WaitForChange(MutexLock& lock) { changed_.wait(lock.native()); }
  /// Wakes every waiter (shutdown).
  void WakeAll() { changed_.notify_all(); }

  void AddDrop(size_t slot, StateDrop drop) { drops_[slot].push_back(std::move(drop)); }
  bool has_drops(size_t slot) const { return !drops_[slot].empty(); }
  std::vector<StateDrop> TakeDrops(size_t slot) { return std::exchange(drops_[slot], {}); }

 private:
  std::vector<bool> executing_;
  std::vector<bool> held_;
  std::vector<bool> waiting_;  // its worker waits on the Dispatcher's work_cv_
  std::vector<bool> lent_;     // another thread runs a call there (SubmitOrRunHere)
  std::vector<std::vector<StateDrop>> drops_;
  std::condition_variable changed_;  // a slot ended a call or was given back
};

}  // namespace manypy
